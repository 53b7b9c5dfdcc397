"""Checkpoints mirrored to an S3 server and fetched back, so a gang restarted on a node whose
checkpoint directory lacks the newest checkpoint resumes from it anyway.

The mirror (`trainmaster checkpoints mirror`, a sidecar of each gang pod) watches the
checkpoint directory with the launcher's own rules (trainmaster.launch: a pointer, a marker
or a settled entry is complete; `.tmp`/hidden names never are) and uploads each checkpoint
that completes: its files under `<prefix>/<entry>/`, then, last, a manifest
`<prefix>/.trainmaster-checkpoints/<entry>.json` naming every file and its size. Only a
manifest makes a mirrored checkpoint exist, so a mirror killed half-way leaves nothing a
fetch would take. Older checkpoints past `keep` are removed, manifest first.

The fetch (`trainmaster checkpoints fetch`, an init container before the trainer) takes
the newest manifest, and when the directory holds no complete checkpoint of that step or
newer, downloads its files into `<entry>.<host>.<pid>.<random>.partial` (a name no reader
takes for a checkpoint, one per fetcher: the gang's pods may share the volume), checks
every size, marks it complete (`.complete`, for a checkpoint that a
pointer file vouched for) and renames it into place: the launcher then finds it as it finds
a checkpoint written on this node (docs/operator.md, "Resume point").

The client is the dataset warm-ups' boto3 client (trainmaster.datacache._s3), configured by
the same AWS_* variables: the endpoint (the S3 server on the storage network) and the keys
from the Secret the spec names. Its errors go through the warm-ups' classifier too, worded
with the jobs[].checkpoint.mirror fields (FETCH_FIELDS, MIRROR_FIELDS).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from trainmaster.datacache._s3 import (
    S3Error,
    S3Fields,
    S3Source,
    _client,
    explain,
    s3_failures,
)
from trainmaster.launch import MARKERS, CheckpointWatcher, Found, newest_complete, step_of

MANIFESTS = ".trainmaster-checkpoints"
"""Folder (under the prefix) of the manifests: one per complete mirrored checkpoint."""
FETCH_SUFFIX = ".partial"
FETCHED_MARKER = ".complete"


@dataclass(frozen=True)
class Mirrored:
    """A checkpoint on the S3 server, as its manifest describes it."""

    entry: str
    step: int
    directory: bool
    files: dict[str, int]
    """Path under the entry ("" for a single-file checkpoint) -> bytes."""

    @property
    def size(self) -> int:
        return sum(self.files.values())


class CheckpointStore:
    """The mirrored checkpoints of one job: s3://bucket/prefix on the configured server."""

    def __init__(self, url: str, client: Any | None = None) -> None:
        self.url = url
        self.where = S3Source.parse(url)
        self.prefix = self.where.prefix.strip("/")
        self.client = client if client is not None else _client(4)

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def data_key(self, entry: str, rel: str) -> str:
        return self._key(entry, rel)

    def manifest_key(self, entry: str) -> str:
        return self._key(MANIFESTS, f"{entry}.json")

    def _keys(self, prefix: str) -> Iterator[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.where.bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents") or []:
                yield str(item["Key"])

    def mirrored(self) -> list[Mirrored]:
        """Every complete mirrored checkpoint, newest first."""
        found: list[Mirrored] = []
        for key in self._keys(self._key(MANIFESTS) + "/"):
            if not key.endswith(".json"):
                continue
            body = self.client.get_object(Bucket=self.where.bucket, Key=key)["Body"]
            try:
                doc = json.loads(body.read())
                found.append(Mirrored(str(doc["entry"]), int(doc["step"]),
                                      bool(doc["directory"]),
                                      {str(k): int(v) for k, v in doc["files"].items()}))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not ours, or cut short: never taken for a checkpoint
            finally:
                body.close()
        return sorted(found, key=lambda m: m.step, reverse=True)

    def upload(self, path: Path, step: int) -> Mirrored:
        """Upload the complete checkpoint at `path`: its files, then its manifest."""
        files: dict[str, int] = {}
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                rel = file.relative_to(path).as_posix()
                self.client.upload_file(str(file), self.where.bucket,
                                        self.data_key(path.name, rel))
                files[rel] = file.stat().st_size
        else:
            self.client.upload_file(str(path), self.where.bucket, self.data_key(path.name, ""))
            files[""] = path.stat().st_size
        done = Mirrored(path.name, step, path.is_dir(), files)
        manifest = {"entry": done.entry, "step": step, "directory": done.directory,
                    "files": files}
        self.client.put_object(Bucket=self.where.bucket, Key=self.manifest_key(path.name),
                               Body=json.dumps(manifest, sort_keys=True).encode())
        return done

    def remove(self, gone: Mirrored) -> None:
        """The manifest first: a checkpoint half removed is no checkpoint."""
        self.client.delete_object(Bucket=self.where.bucket, Key=self.manifest_key(gone.entry))
        for rel in gone.files:
            self.client.delete_object(Bucket=self.where.bucket,
                                      Key=self.data_key(gone.entry, rel))

    def download(self, mirrored: Mirrored, directory: Path) -> bool:
        """Fetch `mirrored` into `directory` under its own name, whole or not at all. False
        when another fetcher (a pod of the same gang on a shared volume) placed it first."""
        final = directory / mirrored.entry
        # Each fetcher lands its own copy: the gang's pods may share the volume.
        landing = directory / (f"{mirrored.entry}.{socket.gethostname()}.{os.getpid()}."
                               f"{secrets.token_hex(3)}{FETCH_SUFFIX}")
        _remove_stale_landings(directory, mirrored.entry, time.time())
        if mirrored.directory:
            landing.mkdir(parents=True)
        try:
            for rel, size in mirrored.files.items():
                target = landing / rel if rel else landing
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(self.where.bucket,
                                          self.data_key(mirrored.entry, rel), str(target))
                got = target.stat().st_size
                if got != size:
                    raise S3Error(f"{self.url}: {mirrored.entry}/{rel} has {got} bytes, its "
                                  f"manifest says {size}; fetch again")
            if mirrored.directory and not any((landing / m).exists() for m in MARKERS):
                # A pointer file beside it vouched for it where it was written; here the
                # marker does, so the launcher's start-up look (evidence only) takes it.
                (landing / FETCHED_MARKER).touch()
            if _holds(directory, mirrored.step):
                return False
            _clear(final)  # an incomplete entry of the same name: never resumed from
            try:
                landing.rename(final)
            except OSError:
                if _holds(directory, mirrored.step):  # placed between the look and here
                    return False
                raise
            return True
        finally:
            _clear(landing)


def _holds(directory: Path, step: int) -> bool:
    found = newest_complete(directory)
    return found is not None and found.step >= step


STALE_LANDING_SECONDS = 600.0


def _remove_stale_landings(directory: Path, entry: str, now: float) -> None:
    """Copies that a killed fetcher left (never a checkpoint, but they take room)."""
    for path in directory.glob(f"{entry}.*{FETCH_SUFFIX}"):
        try:
            if now - path.stat().st_mtime > STALE_LANDING_SECONDS:
                _clear(path)
        except OSError:
            continue


def _clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


_MIRROR = "jobs[].checkpoint.mirror"
FETCH_FIELDS = S3Fields(f"{_MIRROR}.url", f"{_MIRROR}.endpoint", f"{_MIRROR}.credentialsSecret",
                        "the mirror's", "s3:ListBucket and s3:GetObject",
                        "fetch again")
MIRROR_FIELDS = replace(
    FETCH_FIELDS, grants="s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject",
    again="the mirror goes on with the next checkpoint")
"""The mirror writes and removes; a fetch only reads."""


def _guarded(store: CheckpointStore, fields: S3Fields, action: Callable[[], Any]) -> Any:
    """Run one S3 action of `store`; its failure becomes one line naming the field to fix."""
    try:
        return action()
    except s3_failures() as exc:
        raise explain(store.url, store.where.bucket, exc, fields) from None


@dataclass(frozen=True)
class Fetched:
    """What a fetch did: the checkpoint it brought (None: nothing newer there) and why."""

    path: Path | None
    step: int | None
    size: int
    """Bytes this fetch downloaded and placed."""
    reason: str


def fetch_newest(store: CheckpointStore, directory: Path) -> Fetched:
    """Bring the newest mirrored checkpoint into `directory` unless it holds one as new."""
    mirrored = _guarded(store, FETCH_FIELDS, store.mirrored)
    local = newest_complete(directory)
    if not mirrored:
        return Fetched(None, None, 0, f"no checkpoint mirrored at {store.url}")
    newest: Mirrored = mirrored[0]
    if local is not None and local.step >= newest.step:
        return Fetched(None, None, 0, f"{local.path} (step {local.step}) is here; the "
                       f"newest mirrored is step {newest.step}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / newest.entry
    if not _guarded(store, FETCH_FIELDS, lambda: store.download(newest, directory)):
        return Fetched(path, newest.step, 0, f"{newest.entry} (step {newest.step}) was "
                       "placed here by another fetcher while this one fetched it")
    return Fetched(path, newest.step, newest.size, f"fetched {newest.entry} (step "
                   f"{newest.step}, {newest.size} bytes) from {store.url}")


class Mirror:
    """Uploads each checkpoint of a directory once it completes; keeps the newest `keep`."""

    def __init__(self, store: CheckpointStore, directory: Path, keep: int,
                 settle_seconds: float = 5.0) -> None:
        self.store = store
        self.directory = directory
        self.keep = keep
        self.watcher = CheckpointWatcher(directory, settle_seconds)
        self.started = False

    def _start(self) -> None:
        """Nothing at or below the newest mirrored step is uploaded again."""
        mirrored = _guarded(self.store, MIRROR_FIELDS, self.store.mirrored)
        if mirrored:
            self.watcher.reported_step = mirrored[0].step
        self.started = True

    def poll(self) -> Mirrored | None:
        """Upload the newest checkpoint completed since the last poll, if any."""
        if not self.started:
            self._start()
        found: Found | None = self.watcher.poll()
        if found is None or step_of(found.path.name) is None:
            return None
        try:
            done: Mirrored = _guarded(self.store, MIRROR_FIELDS,
                                      lambda: self.store.upload(found.path, found.step))
        except FileNotFoundError:
            # The trainer removed it (past its own `keep`) while it was read: a newer one
            # exists, which the next poll uploads.
            return None
        mirrored: list[Mirrored] = _guarded(self.store, MIRROR_FIELDS, self.store.mirrored)
        stale = mirrored[self.keep:]
        for old in stale:
            _guarded(self.store, MIRROR_FIELDS, partial(self.store.remove, old))
        return done

