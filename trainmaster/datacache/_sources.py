"""Copying a dataset from its declared source into a directory, with progress.

Supported: `file://` URIs and plain paths (a directory tree or one file, e.g. a volume the
warm-up pod mounts), `http://`/`https://` (one file, streamed) and `s3://bucket/prefix`
(every object under the prefix, in parallel, resumable: `_s3`). Other object stores
(`gs://`, `az://`, ...) are refused with a message naming the fix rather than
half-supported; `validate` refuses them in a spec already.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from trainmaster.datacache._progress import Progress
from trainmaster.errors import TrainmasterError
from trainmaster.spec import DATASET_SCHEMES

CHUNK = 1 << 20
SCHEMES = DATASET_SCHEMES
"""The source schemes `trainmaster cache warm` copies from (a plain path is file://)."""
RESUMABLE = ("s3",)
"""Schemes whose partial copy the next warm-up carries on from instead of replacing."""


class SourceError(TrainmasterError):
    """The source cannot be read (unsupported scheme, missing, unreachable)."""


def local_path(source: str) -> Path | None:
    """The path of a file:// URI or plain path; None for other schemes."""
    parts = urlsplit(source)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise SourceError(f"--source {source}: file:// URIs name no host; "
                              f"write file:///path")
        return Path(unquote(parts.path))
    if parts.scheme == "" or (len(parts.scheme) == 1 and source[1:3] == ":\\"):
        return Path(source)
    return None


def _copy_stream(read: Callable[[int], bytes], target: Path, done: int, total: int | None,
                 progress: Progress) -> int:
    with target.open("wb") as out:
        while chunk := read(CHUNK):
            out.write(chunk)
            done += len(chunk)
            progress(done, total)
    return done


def _tree_size(root: Path) -> int:
    if root.is_file():
        return root.stat().st_size
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _fetch_local(root: Path, target: Path, progress: Progress) -> int:
    if not root.exists():
        raise SourceError(f"--source {root}: no such file or directory on this node; mount "
                          "the dataset's volume into the warm-up pod or fix the dataset's "
                          "source in the spec")
    total = _tree_size(root)
    done = 0
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        rel = Path(path.name) if root.is_file() else path.relative_to(root)
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        with path.open("rb") as src:
            done = _copy_stream(src.read, dest, done, total, progress)
        shutil.copystat(path, dest)
    return done


def _fetch_http(source: str, target: Path, progress: Progress, timeout: float) -> int:
    name = Path(unquote(urlsplit(source).path)).name or "data"
    request = urllib.request.Request(source, headers={"User-Agent": "trainmaster-cache"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            target.mkdir(parents=True, exist_ok=True)
            done = _copy_stream(response.read, target / name, 0, total, progress)
    except urllib.error.HTTPError as exc:
        raise SourceError(f"--source {source}: the server answered {exc.code} {exc.reason}"
                          ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SourceError(f"--source {source}: cannot download: {reason}") from None
    if total is not None and done != total:
        raise SourceError(f"--source {source}: got {done} of {total} bytes; the transfer "
                          "was cut short, run the warm-up again")
    return done


def unsupported(source: str) -> str | None:
    """Why `source` cannot be copied (its scheme), or None when it can."""
    if local_path(source) is not None:
        return None
    scheme = urlsplit(source).scheme
    if scheme in SCHEMES:
        return None
    return (f"the {scheme}:// scheme is not supported; use one of "
            f"{', '.join(s + '://' for s in SCHEMES)} (for another object store, its "
            "S3-compatible endpoint, a presigned https:// URL, or a volume that mounts the "
            "bucket, with a file:// source)")


def resumable(source: str) -> bool:
    return local_path(source) is None and urlsplit(source).scheme in RESUMABLE


def fetch(source: str, target: Path, progress: Progress, timeout: float = 60.0,
          workers: int | None = None) -> int:
    """Copy the dataset at `source` into the directory `target`; return the bytes copied."""
    path = local_path(source)
    if path is not None:
        return _fetch_local(path, target, progress)
    scheme = urlsplit(source).scheme
    if scheme in ("http", "https"):
        return _fetch_http(source, target, progress, timeout)
    if scheme == "s3":
        from trainmaster.datacache._s3 import DEFAULT_WORKERS, fetch_s3

        return fetch_s3(source, target, progress, workers or DEFAULT_WORKERS)
    raise SourceError(f"--source {source}: {unsupported(source)}")
