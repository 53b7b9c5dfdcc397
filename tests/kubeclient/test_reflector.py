"""The reflector: list, watch from the list's version, resume, relist after 410."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.scheduler.apifake import FakeApi, pod_obj
from trainmaster.kubeclient import ApiError, Reflector


def test_relist_after_410_reports_what_vanished() -> None:
    a, b, c = pod_obj("a", rv="5"), pod_obj("b", rv="6"), pod_obj("c", rv="9")
    pages = [{"items": [a, b], "metadata": {"resourceVersion": "10"}},
             {"items": [b, c], "metadata": {"resourceVersion": "20"}}]

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        return pages.pop(0)

    events: list[tuple[str, str]] = []

    async def run() -> FakeApi:
        api = FakeApi(handler)
        reflector = Reflector(api, "/api/v1/pods",  # type: ignore[arg-type]
                              lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
                              name="pods", backoff_initial=0.001)
        task = asyncio.create_task(reflector.run())
        await reflector.synced.wait()
        stream = api.stream("/api/v1/pods")
        newer = {**a, "metadata": {**a["metadata"], "resourceVersion": "11"}}
        await stream.put(("MODIFIED", newer))
        await stream.put(ApiError(0, "connection reset"))  # resume from 11, no relist
        await stream.put(ApiError(410, "too old"))  # relist
        while len(events) < 5:
            await asyncio.sleep(0.001)
        task.cancel()
        return api

    api = asyncio.run(run())
    assert events == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "a"),
                      ("ADDED", "c")]
    versions = [params["resourceVersion"] for _, params in api.watch_params]
    assert versions[:3] == ["10", "11", "20"]  # resume at 11, then from the relist


def test_the_first_list_is_served_from_the_watch_cache_and_a_relist_after_410_is_not() -> None:
    """resourceVersion=0 on the first list (one answer from the API server's cache, as
    client-go does); after 410 the old version is gone, so a consistent list follows."""
    pages = [{"items": [pod_obj("a", rv="5")], "metadata": {"resourceVersion": "10"}},
             {"items": [pod_obj("a", rv="5")], "metadata": {"resourceVersion": "20"}}]

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        return pages.pop(0)

    async def run() -> FakeApi:
        api = FakeApi(handler)
        reflector = Reflector(api, "/api/v1/pods", lambda kind, obj: None,  # type: ignore[arg-type]
                              name="pods", backoff_initial=0.001)
        task = asyncio.create_task(reflector.run())
        await reflector.synced.wait()
        await api.stream("/api/v1/pods").put(ApiError(410, "too old"))
        while pages:
            await asyncio.sleep(0.001)
        task.cancel()
        return api

    api = asyncio.run(run())
    lists = [params for method, _, params in api.calls if method == "GET"]
    assert [p.get("resourceVersion") for p in lists] == ["0", None]
    assert all(p["limit"] == "1000" for p in lists)
