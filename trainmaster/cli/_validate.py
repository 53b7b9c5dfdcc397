"""`trainmaster validate` and `trainmaster schema`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="Spec files (YAML or JSON); '-' reads standard input.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable results.")
    ] = False,
) -> None:
    """Check spec files: exit 0 if all are valid, 1 if any is invalid, 2 if one can't be read."""
    from trainmaster.cli._input import read_spec, spec_source
    from trainmaster.spec import SpecInvalidError, SpecReadError, capacity_issues

    results = []
    code = 0
    for given in files:
        path = spec_source(given)
        try:
            spec = read_spec(given)
        except SpecReadError as exc:
            code = 2
            results.append(
                {
                    "file": str(path),
                    "valid": False,
                    "readable": False,
                    "errors": [
                        {"path": "", "message": str(exc), "line": exc.line, "column": exc.column}
                    ],
                }
            )
            if not as_json:
                print(f"error: {exc}", file=sys.stderr)
        except SpecInvalidError as exc:
            code = max(code, 1)
            results.append(
                {
                    "file": str(path),
                    "valid": False,
                    "readable": True,
                    "errors": [i.to_json() for i in exc.issues],
                }
            )
            if not as_json:
                print(str(exc), file=sys.stderr)
        else:
            # Valid, but promising what its nodes cannot hold: said, not refused (the
            # policy rule `capacity-fits` is what fails a pull request on it).
            warnings = capacity_issues(spec)
            results.append({"file": str(path), "valid": True, "readable": True, "errors": [],
                            "warnings": [w.to_json() for w in warnings]})
            if not as_json:
                gpus = sum(n.gpus for n in spec.nodes)
                print(
                    f"{path}: valid ({len(spec.nodes)} nodes, {gpus} GPUs, {len(spec.jobs)} jobs)"
                    + (f", {len(warnings)} warning(s)" if warnings else "")
                )
                for warning in warnings:
                    print(f"{path}: warning: {warning.render()}", file=sys.stderr)
    if as_json:
        print(json.dumps(results, indent=2))
    raise typer.Exit(code)


@app.command()
def schema(
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown", help="The field reference of docs/spec.md instead of the JSON Schema."
        ),
    ] = False,
) -> None:
    """Print the spec's JSON Schema (what schemas/cluster.schema.json holds)."""
    if markdown:
        from trainmaster.spec import reference_markdown

        print(reference_markdown(), end="")
        return
    from trainmaster.spec import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=False))
