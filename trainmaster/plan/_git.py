"""Files at a git revision (or in the working tree), through the git command."""

from __future__ import annotations

import fnmatch
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainmaster.errors import TrainmasterError


class PlanError(TrainmasterError):
    """The plan cannot be made: not a git repository, an unknown revision, a bad path."""

    exit_code = 2


@dataclass(frozen=True)
class Revision:
    """A commit, or the working tree when `commit` is None."""

    ref: str | None
    commit: str | None

    @property
    def label(self) -> str:
        if self.commit is None:
            return "working tree"
        short = self.commit[:7]
        return short if self.ref in (None, self.commit) else f"{self.ref} ({short})"

    def to_json(self) -> dict[str, str | None]:
        return {"ref": self.ref, "commit": self.commit}


class Repo:
    """The git repository around a folder."""

    def __init__(self, start: Path) -> None:
        try:
            top = self._git_in(start, "rev-parse", "--show-toplevel").strip()
        except PlanError:
            raise PlanError(f"{start} is not inside a git repository") from None
        self.root = Path(top)

    @staticmethod
    def _git_in(cwd: Path, *args: str) -> str:
        try:
            proc = subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
            )
        except FileNotFoundError:
            raise PlanError("git is not installed (needed to read specs at a revision)") from None
        if proc.returncode != 0:
            raise PlanError(f"git {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
        return proc.stdout

    def git(self, *args: str) -> str:
        return self._git_in(self.root, *args)

    def revision(self, ref: str | None) -> Revision:
        """The commit a ref names; None means the working tree."""
        if ref is None:
            return Revision(None, None)
        try:
            commit = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        except PlanError:
            raise PlanError(f"{ref!r} is not a commit of {self.root}") from None
        return Revision(ref, commit)

    def relative(self, path: Path) -> str:
        """A path (relative to the current folder) as git names it: from the root, with /."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            raise PlanError(f"{path} is outside the repository {self.root}") from None

    def read(self, rev: Revision, path: str) -> bytes | None:
        """The file's content at `rev`; None when it does not exist there."""
        if rev.commit is None:
            try:
                return (self.root / path).read_bytes()
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise PlanError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
        if not self.git("ls-tree", "--name-only", rev.commit, "--", path).strip():
            return None
        proc = subprocess.run(
            ["git", "show", f"{rev.commit}:{path}"],
            cwd=self.root,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise PlanError(f"git show {rev.commit}:{path}: {proc.stderr.decode().strip()}")
        return proc.stdout

    def files(self, rev: Revision, pattern: str) -> list[str]:
        """Files at `rev` whose root-relative path matches a glob pattern."""
        if rev.commit is None:
            return sorted(p.relative_to(self.root).as_posix() for p in self.root.glob(pattern))
        names = self.git("ls-tree", "-r", "--name-only", rev.commit).splitlines()
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
