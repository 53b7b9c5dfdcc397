"""One image build per session, shared by the image tests (and reused from the cache
when the tree has not changed since the last build)."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT
from trainmaster.image import BuiltImage, build_image
from trainmaster.spec import ImageSpec


@pytest.fixture(scope="session")
def built_image() -> BuiltImage:
    return build_image(ROOT, ImageSpec().reference)
