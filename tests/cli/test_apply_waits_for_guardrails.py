"""`apply` ends when the guardrail policies are in force: it sends each guarded namespace
a dry-run probe pod until the API server refuses it with the guardrail's message, and
says which namespace is not guarded in time. The API server here is a stand-in that
refuses after a few probes; tests/cli/test_apply_guardrails_live.py runs apply against
the real one."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from tests.objects.test_guards import _teams
from trainmaster.apply import ApplyError, _wait_guardrails
from trainmaster.kubeclient import ApiError, Kube
from trainmaster.objects import PROBE_REFUSAL, all_objects


class _Server:
    """Admits the probe `late` times per namespace (the policy not compiled yet), then
    refuses it as the guardrail does."""

    def __init__(self, late: int, never: frozenset[str] = frozenset()) -> None:
        self.late = late
        self.never = never
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    async def request(self, method: str, path: str, *, params: dict[str, str],
                      body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, path, params))
        namespace = path.split("/")[4]
        seen = sum(1 for _, p, _ in self.calls if p == path)
        if seen > self.late and namespace not in self.never:
            raise ApiError(403, "Forbidden", {"message": f"{PROBE_REFUSAL} {namespace} ..."})
        return body


def test_apply_waits_until_every_guarded_namespace_refuses_the_probe() -> None:
    server = _Server(late=2)
    lines: list[str] = []
    asyncio.run(_wait_guardrails(cast(Kube, server), all_objects(_teams()), lines.append))
    assert lines == [f"guardrails in force in namespace {ns}"
                     for ns in ("trainmaster", "team-a", "team-b")]
    paths = [p for _, p, _ in server.calls]
    assert paths.count("/api/v1/namespaces/team-a/pods") == 3  # two admitted, one refused
    assert all(params == {"dryRun": "All"} for _, _, params in server.calls)


def test_a_guardrail_never_in_force_is_an_error_naming_the_namespace() -> None:
    server = _Server(late=0, never=frozenset({"team-b"}))
    with pytest.raises(ApplyError, match="namespace team-b was applied but is not in force"):
        asyncio.run(_wait_guardrails(cast(Kube, server), all_objects(_teams()),
                                     lambda _: None, timeout=0.5))
