"""A plan as Markdown (the pull-request comment) or JSON."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from trainmaster.plan._build import Plan

_TEMPLATES = Path(__file__).resolve().parent.parent / "data" / "templates"
MAX_VALUE = 80
"""Longest value shown in a table cell; a long command line would swamp the comment."""


def _cell(text: str) -> str:
    # A | ends a table cell and a newline ends the row, wherever they appear.
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def code(text: object) -> str:
    """Inline code that survives a table cell (backticks inside would close it)."""
    inner = _cell(str(text)).replace("`", "'")
    return f"`{inner}`"


def value(v: Any) -> str:
    if v is None:
        return "unset"
    shown = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    if len(shown) > MAX_VALUE:
        shown = shown[: MAX_VALUE - 1] + "…"
    return code(shown)


def delta(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


def quota(q: int | None) -> str:
    return "unlimited" if q is None else str(q)


def share(fraction: float | None) -> str:
    """A fraction as a percentage ("-": none, a tree root or no such node)."""
    return "-" if fraction is None else f"{100 * fraction:.1f}%".replace(".0%", "%")


def number(n: float | None) -> str:
    """A figure to one decimal at most ("-": none)."""
    return "-" if n is None else f"{round(n, 1):g}"


def name(text: str | None) -> str:
    """A cohort or queue name ("-": none, e.g. a cohort at the root of its tree)."""
    return "-" if text is None else _cell(text)


def transition(before: object, after: object) -> str:
    return str(after) if before == after else f"{before} → {after}"


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML: escaping is per cell (see `code`)
    )
    env.filters.update(code=code, value=value, delta=delta, quota=quota, text=_cell,
                       share=share, number=number, name=name)
    env.globals["transition"] = transition
    return env


def render_markdown(plan: Plan) -> str:
    return _env().get_template("plan.md.j2").render(plan=plan)


def render_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2)
