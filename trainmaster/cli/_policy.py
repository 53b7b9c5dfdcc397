"""`trainmaster policy check|list`: the platform rules (policies/) without a Pulumi engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trainmaster.cli._app import app

policy_app = typer.Typer(
    help="Platform rules over a spec and the objects it renders to (policy as code).",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")


def _check_file(path: Path) -> tuple[int, dict[str, Any], list[str]]:
    """(exit code, JSON result, human lines) for one spec file."""
    from policies import blocking, evaluate
    from trainmaster.spec import SpecInvalidError, SpecReadError, load_spec

    result: dict[str, Any] = {"file": str(path), "valid": False, "findings": []}
    try:
        spec = load_spec(path)
    except SpecReadError as exc:
        return 2, {**result, "error": str(exc)}, [f"error: {exc}"]
    except SpecInvalidError as exc:
        # Rules run on valid specs only; `trainmaster validate` explains the problems.
        return 1, {**result, "error": str(exc)}, [f"error: {exc}"]
    # Mandatory first: those are what the exit code is about.
    findings = sorted(evaluate(spec), key=lambda f: f.severity != "mandatory")
    mandatory = len(blocking(findings))
    advisory = len(findings) - mandatory
    result.update(
        valid=True,
        findings=[f.to_json() for f in findings],
        mandatory=mandatory,
        advisory=advisory,
    )
    if not findings:
        lines = [f"{path}: passes all policies"]
    else:
        lines = [f"{path}: {mandatory} mandatory, {advisory} advisory finding(s)"]
        width = max(len(f.rule) for f in findings)
        lines += [f"  {f.severity:<9}  {f.rule:<{width}}  {f.render()}" for f in findings]
    return (1 if mandatory else 0), result, lines


@policy_app.command("check")
def check(
    files: Annotated[list[Path], typer.Argument(help="Spec files (YAML or JSON).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable results.")
    ] = False,
) -> None:
    """Check specs against every rule: exit 0 when no mandatory rule fails, 1 when one does
    (or a spec is invalid), 2 when a file cannot be read. Advisories are printed only."""
    code = 0
    results = []
    for path in files:
        rc, result, lines = _check_file(path)
        code = max(code, rc)
        results.append(result)
        if not as_json:
            stream = sys.stderr if "error" in result else sys.stdout
            print("\n".join(lines), file=stream)
    if as_json:
        print(json.dumps(results, indent=2))
    raise typer.Exit(code)


@policy_app.command("list")
def list_rules(
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable rules.")] = False,
) -> None:
    """Print every rule: id, severity and what it requires."""
    from policies import RULES

    if as_json:
        print(json.dumps([r.to_json() for r in RULES], indent=2))
        return
    width = max(len(r.id) for r in RULES)
    for r in RULES:
        extra = f" (defense in depth: {r.defense_in_depth})" if r.defense_in_depth else ""
        print(f"{r.id:<{width}}  {r.severity:<9}  {r.summary}{extra}")


@policy_app.command("rights")
def rights(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable grants and workloads.")
    ] = False,
) -> None:
    """Print who may do what once the spec is applied: every ServiceAccount's rights, how
    each workload runs (privileged, host network, host paths), the namespaces' Pod
    Security levels and the NetworkPolicies. Exit 1 for an invalid spec, 2 for an
    unreadable file."""
    from dataclasses import asdict

    from trainmaster.objects import (
        grants,
        grants_markdown,
        namespaces_markdown,
        network_policies_markdown,
        spec_objects,
        workloads,
        workloads_markdown,
    )
    from trainmaster.spec import load_spec

    spec = load_spec(file)  # unreadable: exit 2, invalid: 1 (the CLI's one boundary)
    objects = spec_objects(spec)
    if as_json:
        print(
            json.dumps(
                {
                    "grants": [asdict(g) for g in grants(objects)],
                    "workloads": [asdict(w) for w in workloads(objects)],
                },
                indent=2,
            )
        )
        return
    for title, table in (
        ("Namespaces", namespaces_markdown),
        ("Identities", grants_markdown),
        ("Workloads", workloads_markdown),
        ("Network policies", network_policies_markdown),
    ):
        print(f"## {title}\n\n{table(objects)}")
