"""The scratch box every scheduler test on the shared local cluster uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import Scratch, scratch_box


@pytest.fixture()
def scratch(local_cluster: LocalCluster) -> Iterator[Scratch]:
    with scratch_box(local_cluster.kubeconfig) as box:
        yield box
