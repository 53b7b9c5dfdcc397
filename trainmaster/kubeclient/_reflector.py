"""List-then-watch of one resource, the way client-go's reflector does it.

Why a reflector and not a bare watch: a watch alone misses whatever changed while it was
not connected. The reflector lists (paged) to get a consistent picture and the resource
version it is valid at, then watches from that version. When the stream ends or breaks
it resumes from the last version it saw, after a backoff if it broke; when the API says
that version is gone (410, compacted) it lists again and turns the difference with what
it had into ADDED / MODIFIED / DELETED events, so the consumer never sees a gap.

Objects are kept by uid: a pod deleted and recreated under the same name is a DELETED
and an ADDED, never a silent replacement.

The first list asks for ``resourceVersion=0`` ("any version"), as client-go's does: the
API server answers from its watch cache in one response instead of reading pages from
etcd, which is what a scheduler starting (or a standby syncing) at 5,000 nodes and
10,000 pods waits for. The answer may be a little old; the watch from its version
catches up, so nothing is missed. After a 410 the version we held is gone from the
cache's window, so that relist is a consistent one (no ``resourceVersion``), paged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ._client import JSON, Kube
from ._errors import GONE, ApiError

log = logging.getLogger("trainmaster.kubeclient")

Handler = Callable[[str, JSON], None]
"""``handler(kind, obj)`` with kind ``ADDED``, ``MODIFIED`` or ``DELETED``; called on the
event loop, so it must not block."""

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


def _uid(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def _rv(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Reflector:
    """Keeps ``store`` (uid -> object) in step with the API and reports each change.

    ``skip`` (see ``Kube.watch``) lets the consumer drop events it knows to be
    irrelevant without decoding them; the store then keeps the older version, which a
    relist reports as MODIFIED, so nothing is lost.
    """

    def __init__(
        self,
        api: Kube,
        path: str,
        handler: Handler,
        *,
        name: str,
        params: Mapping[str, str] | None = None,
        page_size: int = 1000,
        watch_timeout: int = 300,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        optional: bool = False,
        skip: Callable[[bytes], str | None] | None = None,
    ) -> None:
        self.api = api
        self.path = path
        self.name = name
        self.params = dict(params or {})
        self.store: dict[str, JSON] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        self.watch_errors = 0
        self._handler = handler
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._optional = optional
        self._skip = skip
        self._available = True
        self._from_cache = True
        """The next list may be served from the watch cache (see the module doc)."""

    def _emit(self, kind: str, obj: JSON) -> None:
        try:
            self._handler(kind, obj)
        except Exception:  # one bad object must not stop the stream
            meta = obj.get("metadata") or {}
            log.exception("%s: handling %s %s failed", self.name, kind, meta.get("name"))

    async def relist(self) -> None:
        """Full (paged) list; replace the store and emit the difference."""
        items: list[JSON] = []
        first = {"resourceVersion": "0"} if self._from_cache else {}
        params = {**self.params, "limit": str(self._page_size), **first}
        while True:
            try:
                page = await self.api.get(self.path, params)
            except ApiError as err:
                if err.not_found and self._optional:
                    # e.g. the PodGroup CRD is not installed: nothing to watch yet.
                    self._available = False
                    self.resource_version = ""
                    self._replace([])
                    self.synced.set()
                    return
                raise
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                self.resource_version = str(meta.get("resourceVersion", ""))
                break
            # A continue token carries its own version: no resourceVersion with it.
            params = {**self.params, "limit": str(self._page_size), "continue": token}
        self._available = True
        self.relists += 1
        self._replace(items)
        self.synced.set()

    def _replace(self, items: list[JSON]) -> None:
        old = self.store
        new = {_uid(obj): obj for obj in items}
        self.store = new
        for uid, obj in old.items():
            if uid not in new:
                self._emit(DELETED, obj)
        for uid, obj in new.items():
            before = old.get(uid)
            if before is None:
                self._emit(ADDED, obj)
            elif _rv(before) != _rv(obj):
                self._emit(MODIFIED, obj)

    def _apply(self, kind: str, obj: JSON) -> None:
        uid = _uid(obj)
        if kind == DELETED:
            self.store.pop(uid, None)
        else:
            kind = MODIFIED if uid in self.store else ADDED
            self.store[uid] = obj
        self._emit(kind, obj)

    async def run(self) -> None:
        """List if not yet synced, then watch forever (cancel the task to stop)."""
        backoff = self._backoff_initial
        while True:
            try:
                if not self.synced.is_set() or not self.resource_version:
                    await self.relist()
                    if not self._available:  # relist later: the resource may appear
                        await asyncio.sleep(self._backoff_max)
                        continue
                await self._watch()
                backoff = self._backoff_initial  # the server ended the stream: just resume
            except ApiError as err:
                self.watch_errors += 1
                if err.status == GONE:
                    log.info("%s: resource version %s expired; relisting", self.name,
                             self.resource_version)
                    self.resource_version = ""
                    self._from_cache = False
                    continue
                log.warning("%s: %s; retrying in %.1fs", self.name, err, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max)
            except Exception:  # a bug must not leave the cache silently stale: start over
                log.exception("%s: unexpected error; relisting in %.1fs", self.name, backoff)
                self.resource_version = ""
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max)

    async def _watch(self) -> None:
        params: dict[str, Any] = {**self.params, "resourceVersion": self.resource_version}
        async for kind, obj in self.api.watch(self.path, params, self._watch_timeout,
                                              self._skip):
            rv = _rv(obj)
            if rv:
                self.resource_version = rv
            if kind in (ADDED, MODIFIED, DELETED):
                self._apply(kind, obj)
