"""Where an upstream-release family (Recipe.upstream) is built from: the module proxy, or a
source archive the user gives, checked against the pinned digest first.

A user's machine installs such a tool with ``go install MODULE/CMD@VERSION``, which is tried
first. Some proxies refuse a module (this one answers 403 for the version list of Multus'
module, which `go install` reads, and serves kube-router v2.1.0 only); then the unmodified
upstream archive of the release tag, in a folder named by ``--sources`` or
``TRAINMASTER_SOURCES``, is unpacked into the cache and built there. Nothing of it is
copied into this repository.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

from trainmaster.errors import TrainmasterError
from trainmaster.toolchain._recipes import UpstreamSource

SOURCES_ENV = "TRAINMASTER_SOURCES"
SOURCE_FILE = ".source"
"""In a built family's folder: one line saying where its code came from."""


class SourceError(TrainmasterError):
    """No usable source for an upstream family: the message says why and what to give."""


def sources_dir(given: Path | None) -> Path | None:
    """The folder of source archives: the option if given, else TRAINMASTER_SOURCES."""
    if given is not None:
        return given
    env = os.environ.get(SOURCES_ENV, "").strip()
    return Path(env) if env else None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checked_archive(family: str, upstream: UpstreamSource, folder: Path | None,
                    refusal: str) -> Path:
    """The family's archive in ``folder``, after its sha256 matched the pin; else SourceError
    naming what is missing or wrong and how to fix it. ``refusal``: why `go install` failed,
    as go said it."""
    if not upstream.archive:
        raise SourceError(
            f"{family}: go install {upstream.module}@… failed ({refusal}), and no source "
            f"archive is pinned for it: check that $GOPROXY serves {upstream.module}")
    if folder is None:
        raise SourceError(
            f"{family}: go install {upstream.module}@… failed ({refusal}); give "
            f"the folder holding its upstream source archive {upstream.archive} with "
            f"`trainmaster tools build --sources DIR` or {SOURCES_ENV}=DIR")
    archive = folder / upstream.archive
    if not archive.is_file():
        raise SourceError(
            f"{family}: go install {upstream.module}@… failed ({refusal}), and "
            f"the sources folder {folder} has no {upstream.archive}; put the upstream archive "
            f"of the release there (see its README / SHA256SUMS)")
    actual = sha256_of(archive)
    if actual != upstream.sha256:
        raise SourceError(
            f"{family}: refusing {archive}: its sha256 is {actual}, not the pinned "
            f"{upstream.sha256}; it is not the upstream release archive (changed, truncated "
            f"or another version): fetch the release tag again")
    return archive


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack a checked archive into ``dest``; return its one top folder (the module root).
    The `data` filter refuses absolute paths, links out of the tree and device files."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers() if m.name not in ("", ".")}
        if len(tops) != 1:
            raise SourceError(f"{archive} holds {len(tops)} top folders, not one module root")
        tar.extractall(dest, filter="data")
    root = dest / tops.pop()
    if not (root / "go.mod").is_file():
        raise SourceError(f"{archive}: no go.mod at the top of {root.name}/")
    return root


def write_source(folder: Path, line: str) -> None:
    (folder / SOURCE_FILE).write_text(line + "\n")


def read_source(folder: Path) -> str:
    """Where a built family's code came from, or '' for the wrapper-module families."""
    path = folder / SOURCE_FILE
    return path.read_text().strip() if path.is_file() else ""
