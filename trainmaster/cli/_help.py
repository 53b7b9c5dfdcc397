"""Help that shows what a user types: `--nodes INTEGER`, `--spec PATH`, a bare flag.

typer 0.29 prints each parameter's Python annotation instead (`<bool>` on flags,
`<list[Path]>`, `<int>`), which means nothing at a shell prompt. Its help has no hook for
this, so the one method that makes the label is replaced here, at import of the CLI.
"""

from __future__ import annotations

from typing import Any

import typer.core

_WORDS = {"int": "INTEGER", "float": "NUMBER", "str": "TEXT", "path": "PATH", "file": "FILE",
          "directory": "DIR", "bool": "BOOLEAN"}


def _option_label(self: Any, ctx: Any) -> str | None:
    if self.metavar is not None:
        return str(self.metavar)
    if self.is_flag or self.count:
        return None  # a flag takes no value: nothing to type after it
    label = str(self.display_type(ctx)).strip("<>")
    if label.startswith("list[") and label.endswith("]"):
        label = label[5:-1]  # a repeatable option takes one value each time
    if "|" in label:
        return f"[{label}]"  # choices: type one of them
    return _WORDS.get(label.lower(), label.upper())


def _argument_label(self: Any, ctx: Any) -> str | None:
    # The argument's name (SPEC, FILES...) is already the first column.
    return None


def install() -> None:
    typer.core.TyperOption.display_type_rich = _option_label  # type: ignore[method-assign]
    typer.core.TyperArgument.display_type_rich = _argument_label  # type: ignore[method-assign]
