"""What a change to spec files does: jobs, GPU demand per queue, fair-sharing entitlements,
settings, policy findings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from policies import Finding, evaluate
from trainmaster.objects import Replacement, all_objects, replacements
from trainmaster.plan._diff import Change, diff
from trainmaster.plan._fair import EntitlementChange, entitlement_changes
from trainmaster.plan._git import Repo, Revision
from trainmaster.scheduler import DEFAULT_QUEUE
from trainmaster.spec import ClusterSpec, Job, SpecInvalidError, SpecReadError, load_spec_text

DEFAULT_SPECS = "stacks/*/cluster.yaml"
Status = Literal["valid", "invalid", "unreadable", "absent"]


@dataclass(frozen=True)
class SpecState:
    """A spec file at one revision."""

    status: Status
    spec: ClusterSpec | None = None
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "errors": list(self.errors)}


@dataclass(frozen=True)
class JobSummary:
    name: str
    queue: str
    nodes: int
    gpus_per_pod: int
    min_nodes: int | None = None
    """An elastic job's `elastic.minNodes` (None: a rigid job of `nodes` pods)."""
    max_nodes: int | None = None
    """An elastic job's `elastic.maxNodes`: its gang has this many pods."""

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        if job.elastic is None:
            return cls(job.name, job.queue, job.nodes, job.gpus_per_pod)
        return cls(job.name, job.queue, job.nodes, job.gpus_per_pod,
                   job.elastic.min_nodes, job.elastic.max_nodes)

    @property
    def min_gpus(self) -> int:
        """The fewest GPUs the job runs on (an elastic job's minimum size)."""
        return (self.min_nodes or self.nodes) * self.gpus_per_pod

    @property
    def gpus(self) -> int:
        """The most GPUs the job holds: an elastic job grows to `maxNodes` pods."""
        return (self.max_nodes or self.nodes) * self.gpus_per_pod

    @property
    def gpu_range(self) -> str:
        """`16` for a rigid job, `8..32` for an elastic one (its min..max GPUs)."""
        return str(self.gpus) if self.min_gpus == self.gpus else f"{self.min_gpus}..{self.gpus}"

    @property
    def pods(self) -> str:
        """The job's pods: `2`, or `1..4` for an elastic job."""
        return str(self.nodes) if self.max_nodes is None else f"{self.min_nodes}..{self.max_nodes}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "queue": self.queue,
            "nodes": self.nodes,
            "gpusPerPod": self.gpus_per_pod,
            "gpus": self.gpus,
            "minGpus": self.min_gpus,
        }
        if self.max_nodes is not None:
            out["elastic"] = {"minNodes": self.min_nodes, "maxNodes": self.max_nodes}
        return out


@dataclass(frozen=True)
class JobChange:
    before: JobSummary
    after: JobSummary
    changes: tuple[Change, ...]

    @property
    def name(self) -> str:
        return self.after.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(frozen=True)
class QueueDemand:
    """GPUs the jobs of a queue ask for, and its quota (None: unlimited), at both sides."""

    name: str
    before: int
    after: int
    quota_before: int | None
    quota_after: int | None

    @property
    def over_quota(self) -> bool:
        return self.quota_after is not None and self.after > self.quota_after

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "before": self.before,
            "after": self.after,
            "quotaBefore": self.quota_before,
            "quotaAfter": self.quota_after,
            "overQuota": self.over_quota,
        }


@dataclass(frozen=True)
class StackPlan:
    """The plan for one spec file."""

    path: str
    base: SpecState
    head: SpecState
    added: tuple[JobSummary, ...] = ()
    removed: tuple[JobSummary, ...] = ()
    changed: tuple[JobChange, ...] = ()
    queues: tuple[QueueDemand, ...] = ()
    entitlements: tuple[EntitlementChange, ...] = ()
    """Queues and cohorts whose fair-sharing entitlement (or weight, quota, cohort) the
    change moves."""
    settings: tuple[Change, ...] = ()
    """Changed fields outside `jobs` (topology, networks, scheduler, ...)."""
    replaced: tuple[Replacement, ...] = ()
    """Objects the change replaces (delete, then create): an immutable field changes."""
    new_findings: tuple[Finding, ...] = ()
    resolved_findings: tuple[Finding, ...] = ()
    head_findings: tuple[Finding, ...] = ()

    @property
    def has_changes(self) -> bool:
        return bool(
            self.base.status != self.head.status
            or self.added
            or self.removed
            or self.changed
            or self.settings
            or self.head.errors != self.base.errors
        )

    @property
    def new_mandatory(self) -> int:
        return sum(f.severity == "mandatory" for f in self.new_findings)

    def to_json(self) -> dict[str, Any]:
        mandatory = sum(f.severity == "mandatory" for f in self.head_findings)
        return {
            "spec": self.path,
            "changed": self.has_changes,
            "base": self.base.to_json(),
            "head": self.head.to_json(),
            "jobs": {
                "added": [j.to_json() for j in self.added],
                "removed": [j.to_json() for j in self.removed],
                "changed": [j.to_json() for j in self.changed],
            },
            "queues": [q.to_json() for q in self.queues],
            "entitlements": [e.to_json() for e in self.entitlements],
            "settings": [c.to_json() for c in self.settings],
            "replaced": [r.to_json() for r in self.replaced],
            "findings": {
                "new": [f.to_json() for f in self.new_findings],
                "resolved": [f.to_json() for f in self.resolved_findings],
                "head": {
                    "mandatory": mandatory,
                    "advisory": len(self.head_findings) - mandatory,
                },
            },
        }


@dataclass(frozen=True)
class Plan:
    base: Revision
    head: Revision
    stacks: tuple[StackPlan, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base.to_json(),
            "head": self.head.to_json(),
            "stacks": [s.to_json() for s in self.stacks],
        }


def _load(repo: Repo, rev: Revision, path: str) -> SpecState:
    raw = repo.read(rev, path)
    if raw is None:
        return SpecState("absent")
    source = path if rev.commit is None else f"{rev.commit[:7]}:{path}"
    try:
        return SpecState("valid", load_spec_text(raw.decode("utf-8"), source))
    except UnicodeDecodeError as exc:
        return SpecState("unreadable", errors=(f"{source}: not UTF-8 text (byte {exc.start})",))
    except SpecReadError as exc:
        return SpecState("unreadable", errors=(str(exc),))
    except SpecInvalidError as exc:
        return SpecState("invalid", errors=tuple(i.render(source) for i in exc.issues))


def _dump(model: Any) -> dict[str, Any]:
    # Defaults included: writing out a default value is not a change.
    data: dict[str, Any] = model.model_dump(by_alias=True, mode="json")
    return data


def _objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """What `trainmaster apply` and `pulumi up` put on the cluster (the gangs are the
    operator's: it creates a new Job per attempt)."""
    return all_objects(spec)


def _queues(base: ClusterSpec | None, head: ClusterSpec | None) -> tuple[QueueDemand, ...]:
    def demand(spec: ClusterSpec | None) -> dict[str, int]:
        out: dict[str, int] = {}
        for job in spec.jobs if spec else []:  # an elastic job at its most (maxNodes)
            out[job.queue] = out.get(job.queue, 0) + JobSummary.of(job).gpus
        return out

    def quotas(spec: ClusterSpec | None) -> dict[str, int | None]:
        return {q.name: q.quota for q in spec.scheduler.queues} if spec else {}

    before, after = demand(base), demand(head)
    quota_before, quota_after = quotas(base), quotas(head)
    # A spec that declares no `default` queue is rendered with an empty one (0 GPUs), so
    # declaring it on one side moves its quota from 0, not from "unlimited".
    for spec, mine, other in ((base, quota_before, quota_after),
                              (head, quota_after, quota_before)):
        if spec is not None and DEFAULT_QUEUE in other and DEFAULT_QUEUE not in mine:
            mine[DEFAULT_QUEUE] = 0
    names = list(dict.fromkeys([*quota_after, *after, *quota_before, *before]))
    return tuple(
        QueueDemand(n, before.get(n, 0), after.get(n, 0), quota_before.get(n), quota_after.get(n))
        for n in names
    )


def plan_stack(path: str, base: SpecState, head: SpecState) -> StackPlan:
    """Compare one spec file's two states."""
    old, new = base.spec, head.spec
    old_jobs = {j.name: j for j in old.jobs} if old else {}
    new_jobs = {j.name: j for j in new.jobs} if new else {}
    # An invalid side tells nothing about jobs: compare only when both sides can be read,
    # or when the file was added or removed (every job added or removed).
    comparable = (old is not None or base.status == "absent") and (
        new is not None or head.status == "absent"
    )
    added: tuple[JobSummary, ...] = ()
    removed: tuple[JobSummary, ...] = ()
    changed: tuple[JobChange, ...] = ()
    settings: tuple[Change, ...] = ()
    if comparable:
        added = tuple(JobSummary.of(j) for n, j in new_jobs.items() if n not in old_jobs)
        removed = tuple(JobSummary.of(j) for n, j in old_jobs.items() if n not in new_jobs)
        changed = tuple(
            JobChange(JobSummary.of(old_jobs[n]), JobSummary.of(j), tuple(changes))
            for n, j in new_jobs.items()
            if n in old_jobs and (changes := diff(_dump(old_jobs[n]), _dump(j)))
        )
    replaced: tuple[Replacement, ...] = ()
    entitled: tuple[EntitlementChange, ...] = ()
    if comparable:
        entitled = entitlement_changes(old, new)
    if old is not None and new is not None:
        replaced = tuple(replacements(_objects(old), _objects(new)))
        settings = tuple(
            diff(
                {k: v for k, v in _dump(old).items() if k != "jobs"},
                {k: v for k, v in _dump(new).items() if k != "jobs"},
            )
        )
    old_findings = evaluate(old) if old else []
    new_findings = evaluate(new) if new else []
    old_keys = {f.key for f in old_findings}
    new_keys = {f.key for f in new_findings}
    return StackPlan(
        path=path,
        base=base,
        head=head,
        added=added,
        removed=removed,
        changed=changed,
        queues=_queues(old, new) if comparable else (),
        entitlements=entitled,
        settings=settings,
        replaced=replaced,
        # Mandatory first: those decide whether the change can merge.
        new_findings=tuple(
            sorted(
                (f for f in new_findings if f.key not in old_keys),
                key=lambda f: f.severity != "mandatory",
            )
        ),
        # A head that does not load resolves nothing: its findings are unknown.
        resolved_findings=(
            tuple(f for f in old_findings if f.key not in new_keys)
            if head.status in ("valid", "absent") else ()
        ),
        head_findings=tuple(new_findings),
    )


def build_plan(
    base: str,
    head: str | None = None,
    specs: Sequence[Path] = (),
    cwd: Path | None = None,
) -> Plan:
    """Plan the change from `base` to `head` (None: the working tree) for spec files.

    `specs` are paths relative to `cwd`; none means every file matching DEFAULT_SPECS at
    either revision. Raises PlanError for a missing repository, revision or path.
    """
    repo = Repo(cwd or Path.cwd())
    base_rev, head_rev = repo.revision(base), repo.revision(head)
    if specs:
        paths = [repo.relative((cwd or Path.cwd()) / p) for p in specs]
    else:
        paths = sorted(
            set(repo.files(base_rev, DEFAULT_SPECS)) | set(repo.files(head_rev, DEFAULT_SPECS))
        )
    stacks = tuple(
        plan_stack(p, _load(repo, base_rev, p), _load(repo, head_rev, p))
        for p in dict.fromkeys(paths)
    )
    return Plan(base_rev, head_rev, stacks)
