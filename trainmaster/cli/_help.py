"""Help that shows what a user types: `--nodes INTEGER`, `--spec PATH`, a bare flag.

typer 0.29 prints each parameter's Python annotation instead (`<bool>` on flags,
`<list[Path]>`, `<int>`), which means nothing at a shell prompt. Its help has no hook for
this, so the few methods that make the labels are replaced here, at import of the CLI.

It also cuts a word longer than the help column with "…" (a CSV header such as
`id,submit_s,duration_s,...` at 80 columns): help text folds such words onto the next
line instead, so nothing a user has to type is lost.
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


def _argument_usage(self: Any) -> str:
    """`FILE...`, `[SPEC]...`: an argument as typed on the usage line (typer: `{files}`)."""
    if self.metavar is not None:
        return str(self.metavar)
    name = str(self.name).upper()
    if not self.required:
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _argument_name(self: Any) -> str:
    if self.metavar is not None:
        return str(self.metavar)
    return str(self.name).upper() + ("..." if self.nargs != 1 else "")


def _fold_long_words() -> None:
    """Make typer's help text fold words longer than the column (imported only when help
    is printed: rich costs start-up time)."""
    import typer.rich_utils

    rich_utils: Any = typer.rich_utils
    make = rich_utils._make_rich_text
    if getattr(make, "folds", False):
        return

    def folding(**kwargs: Any) -> Any:
        text = make(**kwargs)
        if hasattr(text, "overflow"):
            text.overflow = "fold"  # a rich Text: wrap long words, never cut them
        return text

    folding.folds = True  # type: ignore[attr-defined]
    rich_utils._make_rich_text = folding
    # The option names (`--leaves-per-spine`) too: a narrow column wraps them, whole.
    for name in ("highlighter", "negative_highlighter"):
        setattr(rich_utils, name, _FoldingHighlighter(getattr(rich_utils, name)))


class _FoldingHighlighter:
    """A rich highlighter whose Text folds long words instead of cutting them."""

    def __init__(self, highlighter: Any) -> None:
        self.highlighter = highlighter

    def __call__(self, text: Any) -> Any:
        out = self.highlighter(text)
        if hasattr(out, "overflow"):
            out.overflow = "fold"
        return out


def _folding_help(original: Any) -> Any:
    def format_help(self: Any, ctx: Any, formatter: Any) -> Any:
        _fold_long_words()
        return original(self, ctx, formatter)

    return format_help


def install() -> None:
    core: Any = typer.core
    core.TyperCommand.format_help = _folding_help(core.TyperCommand.format_help)
    core.TyperGroup.format_help = _folding_help(core.TyperGroup.format_help)
    core.TyperOption.display_type_rich = _option_label
    core.TyperArgument.display_type_rich = _argument_label
    core.TyperArgument._usage_display_name = _argument_usage
    core.TyperArgument._rich_display_name = _argument_name
