"""Errors raised while loading a spec.

    TrainmasterError               (trainmaster.errors)
     └── SpecError                 a spec could not be used
          ├── SpecReadError        the file is missing, unreadable or not YAML/JSON (exit 2)
          └── SpecInvalidError     it parsed, but breaks the schema or a rule (exit 1)

SpecInvalidError carries every problem at once as SpecIssue values, each naming the field
path (``jobs[3].gpusPerPod``), what is wrong and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmaster.errors import TrainmasterError


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec: where it is and what to do about it."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def render(self, source: str | None = None) -> str:
        where = ""
        if source is not None:
            where = f"{source}:{self.line}: " if self.line is not None else f"{source}: "
        return f"{where}{self.path or '<root>'}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }


class SpecError(TrainmasterError):
    """A spec could not be used."""


class SpecReadError(SpecError):
    """The file is missing, unreadable, or not valid YAML/JSON."""

    exit_code = 2

    def __init__(
        self, source: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        where = f"{source}:{line}:{column}" if line is not None else source
        super().__init__(f"{where}: {message}")


class SpecInvalidError(SpecError):
    """The spec parsed but breaks the schema or a semantic rule."""

    def __init__(self, source: str, issues: list[SpecIssue]) -> None:
        self.source = source
        self.issues = sorted(issues, key=lambda i: (i.line or 0, i.path))
        lines = [issue.render(source) for issue in self.issues]
        super().__init__(f"{source}: {len(self.issues)} problem(s)\n" + "\n".join(lines))
