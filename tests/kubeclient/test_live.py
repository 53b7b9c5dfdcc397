"""The one client against the real local control plane: server-side apply with the field
manager, discovery of kinds it does not know, errors, a real 409 retried, the reflector."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.helpers import throwaway_namespace
from trainmaster.kubeclient import (
    FIELD_MANAGER,
    ApiError,
    Kube,
    Reflector,
    SyncKube,
    api_path,
    retry_on_conflict,
)
from trainmaster.polling import wait_until_async

pytestmark = pytest.mark.integration


@pytest.fixture()
def kube(local_cluster: LocalCluster) -> Iterator[SyncKube]:
    with SyncKube.connect(local_cluster.kubeconfig) as client:
        yield client


@pytest.fixture()
def namespace(kube: SyncKube) -> Iterator[str]:
    with throwaway_namespace(kube, "tmkc") as name:
        yield name


def _configmap(namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": namespace}, "data": data}


def test_apply_owns_fields_as_trainmaster_and_errors_carry_their_status(
    kube: SyncKube, namespace: str
) -> None:
    kube.apply(_configmap(namespace, {"a": "1"}))
    applied = kube.apply(_configmap(namespace, {"a": "2"}))  # apply again: an update
    assert applied["data"] == {"a": "2"}
    managers = {(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]}
    assert (FIELD_MANAGER, "Apply") in managers

    with pytest.raises(ApiError) as exists:
        kube.post(api_path("v1", "configmaps", namespace), _configmap(namespace, {}))
    assert exists.value.conflict and not exists.value.transient
    with pytest.raises(ApiError) as missing:
        kube.get(api_path("v1", "configmaps", namespace, "nope"))
    assert missing.value.not_found
    assert kube.delete(api_path("v1", "configmaps", namespace, "nope"), missing_ok=True) \
        is False
    assert kube.delete(api_path("v1", "configmaps", namespace, "cm")) is True


def test_apply_finds_a_kind_it_does_not_know_by_discovery(kube: SyncKube) -> None:
    name = f"tmkc-{uuid.uuid4().hex[:8]}"
    quota = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": 7}
    try:
        assert kube.apply(quota)["value"] == 7
        assert kube.run(kube.kube.resource("scheduling.k8s.io/v1", "PriorityClass")) == \
            ("priorityclasses", False)
        with pytest.raises(ApiError) as unknown:
            kube.run(kube.kube.resource("example.com/v1", "Nothing"))
        assert unknown.value.not_found
    finally:
        kube.delete(api_path("scheduling.k8s.io/v1", "priorityclasses", None, name),
                    missing_ok=True)


def test_a_real_conflict_is_read_again_and_written(kube: SyncKube, namespace: str) -> None:
    path = api_path("v1", "configmaps", namespace, "cm")
    kube.apply(_configmap(namespace, {"n": "0"}))
    attempts: list[str] = []

    async def bump(api: Kube) -> dict[str, Any]:
        async def attempt() -> dict[str, Any]:
            current = await api.get(path)
            attempts.append(current["metadata"]["resourceVersion"])
            if len(attempts) == 1:  # someone else writes between our read and our write
                await api.patch(path, {"data": {"other": "x"}})
            guarded = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                       "data": {"n": str(int(current["data"]["n"]) + 1)}}
            return await api.patch(path, guarded)

        return await retry_on_conflict(attempt)

    result = kube.run(bump(kube.kube))
    assert len(attempts) == 2 and attempts[0] != attempts[1]
    assert result["data"] == {"n": "1", "other": "x"}


def test_the_reflector_lists_then_watches_from_the_lists_version(
    kube: SyncKube, namespace: str
) -> None:
    events: list[tuple[str, str]] = []
    kube.post(api_path("v1", "configmaps", namespace), {"metadata": {"name": "first"}})

    async def follow(api: Kube) -> None:
        reflector = Reflector(api, api_path("v1", "configmaps", namespace),
                              lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
                              name="configmaps")
        task = asyncio.create_task(reflector.run())
        try:
            await asyncio.wait_for(reflector.synced.wait(), 30)
            # The first list asks for resourceVersion=0 (the watch cache, as client-go's
            # does), which may lag a write just made: then "first" comes from the watch.
            await wait_until_async(lambda: _seen(events, ("ADDED", "first")),
                                   "the first object", 30, 0.05)
            listed = reflector.resource_version
            await api.post(api_path("v1", "configmaps", namespace),
                           {"metadata": {"name": "later"}, "data": {}})
            await wait_until_async(lambda: _seen(events, ("ADDED", "later")),
                                   "the watch event", 30, 0.05)
            assert int(reflector.resource_version) > int(listed)
            assert events.count(("ADDED", "first")) == 1, events  # listed or watched, once
        finally:
            task.cancel()

    kube.run(follow(kube.kube))


async def _seen(events: list[tuple[str, str]], event: tuple[str, str]) -> bool:
    return event in events
