"""docs/security.md states what the rendered objects grant: its generated tables match the
dev stack's objects (trainmaster.objects._rights), the hand-kept rights table is exactly
what the bindings grant (a missing or an extra right fails), and every identity and every
workload with host access has its reason written down.

Regenerate the generated tables after an intended change:
TRAINMASTER_UPDATE_DOCS=1 pytest tests/objects (the rights table is edited by hand).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from tests.helpers import ROOT
from tests.security.documented import Right, documented_rights, documented_spec
from trainmaster.objects import (
    grants,
    namespaces_markdown,
    network_policies_markdown,
    service_accounts,
    spec_objects,
    workloads,
    workloads_markdown,
)

DOC = ROOT / "docs" / "security.md"
Tables = Callable[[Iterable[Mapping[str, Any]]], str]
TABLES: dict[str, Tables] = {
    "namespaces": namespaces_markdown,
    "workloads": workloads_markdown,
    "network-policies": network_policies_markdown,
}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- BEGIN generated: {name} -->\n)(.*?)(<!-- END generated: {name} -->)", re.S
    )


def _objects() -> list[dict[str, Any]]:
    return spec_objects(documented_spec())


@pytest.mark.parametrize("name", list(TABLES))
def test_generated_table_matches_the_objects(name: str) -> None:
    table = TABLES[name](_objects())
    text = DOC.read_text()
    match = _block(name).search(text)
    assert match, f"docs/security.md has no block `<!-- BEGIN generated: {name} -->`"
    if os.environ.get("TRAINMASTER_UPDATE_DOCS"):
        DOC.write_text(text[: match.start(2)] + table + text[match.end(2) :])
        return
    assert match.group(2) == table, "regenerate: TRAINMASTER_UPDATE_DOCS=1 pytest tests/objects"


def _rendered_rights() -> set[Right]:
    return {Right(g.account, g.scope, g.api_group, g.resource, frozenset(g.verbs),
                  frozenset(g.names)) for g in grants(_objects())}


def test_the_bindings_grant_exactly_the_documented_rights() -> None:
    documented = documented_rights()
    assert len(set(documented)) == len(documented), "a row of the rights table is repeated"
    rendered = _rendered_rights()
    assert sorted(map(str, rendered - set(documented))) == [], "granted, not documented"
    assert sorted(map(str, set(documented) - rendered)) == [], "documented, not granted"


def _why_rows(section: str) -> dict[str, str]:
    """The `| `name` | why |` rows of the table under `## {section}`."""
    text = DOC.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", body, re.M))


def test_every_identity_says_why() -> None:
    objects = _objects()
    why = _why_rows("Why each identity has its rights")
    # Both jobs' trainers stand for every job's: the doc explains `<job>-trainer` once.
    accounts = {
        re.sub(r"/[a-z0-9-]+-trainer$", "/<job>-trainer", a) for a in service_accounts(objects)
    }
    holders = {
        re.sub(r"/[a-z0-9-]+-trainer$", "/<job>-trainer", g.account) for g in grants(objects)
    }
    assert holders <= accounts
    assert set(why) == accounts | {"trainmaster/default", "trainmaster-system/default"}
    assert all(reason.strip() for reason in why.values())


def test_every_host_access_says_why() -> None:
    why = _why_rows("What runs privileged or on the host")
    exposed = {
        w.name.split(" ", 1)[1]
        for w in workloads(_objects())
        if w.privileged or w.host_network or w.host_paths or w.added_capabilities
    }
    exposed = {re.sub(r"/[a-z0-9-]+-r0$", "/<job>-r<attempt>", n) for n in exposed}
    exposed = {re.sub(r"-warmup-[a-z0-9-]+$", "-warmup-<dataset>", n) for n in exposed}
    assert set(why) == exposed
