"""Copying a dataset from its declared source into a directory, with progress.

Supported: `file://` URIs and plain paths (a directory tree or one file, e.g. a volume the
warm-up pod mounts) and `http://`/`https://` (one file, streamed). Object stores (`s3://`,
`gs://`, `az://`, ...) need a client library that trainmaster does not pin; they are
refused with a message naming the fix rather than half-supported.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from trainmaster.errors import TrainmasterError

Progress = Callable[[int, int | None], None]
"""Called with (bytes copied so far, total bytes if known)."""
CHUNK = 1 << 20


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


def fetch(source: str, target: Path, progress: Progress, timeout: float = 60.0) -> int:
    """Copy the dataset at `source` into the directory `target`; return the bytes copied."""
    path = local_path(source)
    if path is not None:
        return _fetch_local(path, target, progress)
    scheme = urlsplit(source).scheme
    if scheme in ("http", "https"):
        return _fetch_http(source, target, progress, timeout)
    raise SourceError(
        f"--source {source}: the {scheme}:// scheme is not supported by trainmaster cache "
        "warm (no object-store client is pinned); use file:// (a volume mounted into the "
        "warm-up pod, e.g. by a CSI driver for the store) or http(s):// (a presigned URL)")
