"""Blocking calls for the CLI, the demo and tests, over the one async ``Kube``.

Not a second client: every call runs ``Kube``'s coroutine on a private event loop in a
daemon thread, so kubeconfig, errors, paths, apply and rate limits are the same code.
Calls may come from several threads at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ._client import JSON, Kube

T = TypeVar("T")


class SyncKube:
    """``SyncKube.connect(kubeconfig)``; use as a context manager or ``close()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 kube: Kube) -> None:
        self._loop = loop
        self._thread = thread
        self.kube = kube
        """The async client, for ``run(some_coroutine(sync_kube.kube, ...))``."""

    @classmethod
    def connect(cls, kubeconfig: Path | None = None, *, pool: int = 16,
                qps: float | None = None, burst: int | None = None) -> SyncKube:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="kubeclient", daemon=True)
        thread.start()
        try:
            kube = asyncio.run_coroutine_threadsafe(
                Kube.connect(kubeconfig, pool=pool, qps=qps, burst=burst), loop).result()
        except BaseException:
            _stop(loop, thread)
            raise
        return cls(loop, thread, kube)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine (typically one taking ``self.kube``) and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self.run(self.kube.close())
        finally:
            _stop(self._loop, self._thread)

    def __enter__(self) -> SyncKube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the async client's calls, blocking --------------------------------------------

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return self.run(self.kube.get(path, params))

    def list(self, path: str, selector: str | None = None,
             params: Mapping[str, str] | None = None) -> list[JSON]:
        return self.run(self.kube.list(path, selector, params))

    def post(self, path: str, body: Any) -> JSON:
        return self.run(self.kube.post(path, body))

    def patch(self, path: str, body: Any, patch_type: str = "merge") -> JSON:
        return self.run(self.kube.patch(path, body, patch_type))

    def apply(self, obj: JSON, *, force: bool = True) -> JSON:
        return self.run(self.kube.apply(obj, force=force))

    def delete(self, path: str, body: Any = None, *, propagation: str | None = None,
               grace: int | None = None, missing_ok: bool = False) -> bool:
        return self.run(self.kube.delete(path, body, propagation=propagation, grace=grace,
                                         missing_ok=missing_ok))


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
