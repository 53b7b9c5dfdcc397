"""The rights docs/security.md states for each identity, parsed from its hand-kept table.

This is the independent record the tests hold the rendered bindings (tests/objects) and the
API server (tests/security, live) to: the renderer changing a right makes them fail until
the table, a reviewed document, says the same. The table describes the dev stack (cluster
`dev`, namespace `trainmaster`) with its optional identities on (`documented_spec`);
`for_cluster` renames it for another name and namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tests.helpers import ROOT, STACKS
from trainmaster.spec import ClusterSpec, load_spec

DOC = ROOT / "docs" / "security.md"
BEGIN, END = "<!-- BEGIN expected: grants -->\n", "<!-- END expected: grants -->"
DOC_CLUSTER, DOC_NAMESPACE = "dev", "trainmaster"
_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


@dataclass(frozen=True)
class Right:
    """One row: `account` may `verbs` on `api_group`/`resource` in `scope` (a namespace or
    `cluster`), limited to the objects `names` when there are any."""

    account: str
    scope: str
    api_group: str
    resource: str
    verbs: frozenset[str]
    names: frozenset[str]


def _cell(text: str) -> frozenset[str]:
    text = text.strip()
    return frozenset() if text == "—" else frozenset(v.strip() for v in text.split(","))


def with_optional_identities(spec: ClusterSpec) -> ClusterSpec:
    """The spec with every optional identity on (the in-cluster UI), as the table lists."""
    return spec.model_copy(update={"ui": spec.ui.model_copy(update={"enabled": True})})


def documented_spec() -> ClusterSpec:
    """What the table describes: the dev stack, with every optional identity on."""
    return with_optional_identities(load_spec(STACKS / "dev" / "cluster.yaml"))


def documented_rights(block: str = "grants") -> list[Right]:
    """The rows of the block `<!-- BEGIN expected: {block} -->` (the spec's grants, or the
    monitoring stack's: `monitoring-grants`)."""
    begin, end = BEGIN.replace("grants", block), END.replace("grants", block)
    text = DOC.read_text()
    assert begin in text and end in text, f"{DOC}: no block {begin.strip()}"
    body = text.split(begin, 1)[1].split(end, 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    rights = []
    for line in rows:
        match = _ROW.match(line)
        assert match, f"{DOC}: cannot read the row {line!r}"
        account, scope, group, resource, verbs, names = (g.strip() for g in match.groups())
        rights.append(Right(account, scope, "" if group == "core" else group, resource,
                            _cell(verbs), _cell(names)))
    assert rights, f"{DOC}: the expected grants table is empty"
    return rights


def for_cluster(rights: list[Right], cluster: str, namespace: str) -> list[Right]:
    """The table for a copy of the dev stack named `cluster` in `namespace`."""
    spaces = {DOC_NAMESPACE: namespace, f"{DOC_NAMESPACE}-system": f"{namespace}-system"}

    def name(account_name: str) -> str:
        prefix = f"{DOC_CLUSTER}-"
        return (f"{cluster}-{account_name[len(prefix):]}" if account_name.startswith(prefix)
                else account_name)

    out = []
    for right in rights:
        ns, _, account_name = right.account.partition("/")
        out.append(replace(right, account=f"{spaces.get(ns, ns)}/{name(account_name)}",
                           scope=spaces.get(right.scope, right.scope)))
    return out
