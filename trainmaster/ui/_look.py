"""The look every trainmaster page shares, and static pages written in it.

The UI's views and the pages written to files (`trainmaster simulate --report`) render
from the same templates (``_look.html``: head and masthead) with the same stylesheet,
which a static page gets a copy of beside it: no server, no CDN.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2

from trainmaster.status import age

ASSETS = Path(str(files("trainmaster") / "data" / "ui"))
STYLESHEET = "ui.css"


def _seconds(value: float | None) -> str:
    return "-" if value is None else age(value)


def _clock(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 60:.1f}/min" if value < 1 else f"{value:.2f}/s"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ASSETS / "templates")),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(seconds=_seconds, clock=_clock, rate=_rate)
    return env


def write_page(directory: Path, template: str, title: str, **context: Any) -> Path:
    """``directory/index.html`` from ``template``, with the stylesheet copied beside it;
    return the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ASSETS / "static" / STYLESHEET, directory / STYLESHEET)
    page = directory / "index.html"
    page.write_text(environment().get_template(template).render(
        title=title, stylesheet=STYLESHEET, **context))
    return page
