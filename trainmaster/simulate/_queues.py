"""The simulation's queues: the scheduler's queue config, and each job's queue and priority.

They come from where the scheduler gets them:

* ``--spec FILE``: the spec's ``scheduler.queues`` (``nominalQuota``, ``cohort``,
  ``borrowingLimit``, ``priority``, ``preemption``) and ``scheduler.preemption``, turned
  into ``QueueSpec`` by the same code that renders the scheduler's config file;
* ``--nodes N --queues FILE``: a YAML file with the same two keys as a spec's
  ``scheduler`` section (``queues``, and ``preemption``, true by default as in a spec),
  checked by the spec's own queue rules;
* ``--nodes N`` alone: no queue config at all. As in the scheduler, nothing is then
  enforced: any queue name is accepted and recorded, there is no quota and no preemption.

A job's queue is its trace row's ``queue`` (empty: ``default``); its priority is the
row's ``priority``, else its queue's (the PriorityClass the spec renders), else 0. With
queues configured, a queue the config does not have (``default`` included, unless it is
declared) is an error naming the row and column: the scheduler would hold such a gang
forever ("queue X does not exist"), and the simulator never invents a queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainmaster.scheduler import (
    DEFAULT_QUEUE,
    CohortSpec,
    FairSharing,
    QueueLedger,
    QueueSpec,
    base_units,
    cohort_specs,
    fair_sharing,
    queue_specs,
)

from ._jobs import Job, WorkloadError

if TYPE_CHECKING:
    from trainmaster.spec import SchedulerSpec


@dataclass(frozen=True, slots=True)
class QueueConfig:
    queues: tuple[QueueSpec, ...] = ()
    """Empty: no queue config; nothing is enforced (the scheduler's rule)."""
    priorities: Mapping[str, int] = field(default_factory=dict)
    """Queue -> the value of its PriorityClass (jobs that set no priority get it)."""
    preemption: bool = False
    """The scheduler's ``preemption`` switch (the spec's ``scheduler.preemption``)."""
    default: str = DEFAULT_QUEUE
    source: str = ""
    """Where the queues were declared, for error messages."""
    cohorts: tuple[CohortSpec, ...] = ()
    fair: FairSharing = field(default_factory=FairSharing)

    @property
    def configured(self) -> bool:
        return bool(self.queues)

    @property
    def enforced(self) -> bool:
        """Some queue has a quota: admission must ask the ledger."""
        return any(q.limited for q in self.queues)

    def spec(self, name: str) -> QueueSpec | None:
        for queue in self.queues:
            if queue.name == name:
                return queue
        return None

    def ceiling(self, name: str) -> int | None:
        """The most GPUs a queue can ever hold at once (None: no limit): what the
        scheduler's ledger admits with nothing running (its nominal quota, or in a cohort
        tree what it can borrow on top within every level's limits)."""
        return QueueLedger(self.queues, self.default, self.cohorts).ceiling(name)


def _from_scheduler_section(section: SchedulerSpec, source: str) -> QueueConfig:
    """Spec queues -> the scheduler's config entries -> ``QueueSpec``: the same two steps
    (``config_queues``, ``queue_specs``) that the deployed scheduler's queues take, and
    likewise its cohorts and fair-sharing settings."""
    from trainmaster.objects import config_fair_sharing, config_queues

    specs = tuple(queue_specs(config_queues(section.queues), base_units))
    rest = config_fair_sharing(section)
    cohorts = tuple(cohort_specs(rest.get("cohorts", []), base_units))
    fair = fair_sharing(rest.get("fairSharing"), rest.get("admissionFairSharing"))
    priorities = {q.name: q.priority for q in section.queues}
    return QueueConfig(specs, priorities, section.preemption, DEFAULT_QUEUE, source,
                       cohorts, fair)


def spec_queues(path: Path) -> QueueConfig:
    """The queues of a TrainingCluster spec (validated as ``trainmaster validate`` does)."""
    from trainmaster.spec import load_spec

    return _from_scheduler_section(load_spec(path).scheduler, f"{path} scheduler.queues")


def file_queues(path: Path) -> QueueConfig:
    """``--queues FILE``: ``{queues: [...], preemption: bool}`` as in a spec's
    ``scheduler`` section; every problem names the field and exits 1."""
    from pydantic import ValidationError

    from trainmaster.spec import (
        SchedulerSpec,
        SpecInvalidError,
        SpecIssue,
        SpecReadError,
        format_path,
        line_of,
        parse_document,
        parse_path,
        queue_issues,
    )

    source = str(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SpecReadError(source, f"cannot read the file: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise SpecReadError(source, f"not UTF-8 text (byte {err.start})") from None
    data, lines = parse_document(text, source)

    def at(path: str, message: str) -> SpecIssue:  # with the line, as spec errors have
        return SpecIssue(path, message, *line_of(lines, parse_path(path)))

    if not isinstance(data, dict) or "queues" not in data:
        raise SpecInvalidError(source, [SpecIssue(
            "", "a queues file is a mapping with `queues:` (a list as in a spec's "
            "scheduler.queues) and optionally `preemption: false` (on by default, as in a "
            "spec)")])
    unknown = sorted(set(data) - {"queues", "preemption", "cohorts", "fairSharing"})
    if unknown:
        raise SpecInvalidError(source, [at(
            key, "unknown key: a queues file has only `queues`, `cohorts`, `fairSharing` "
            "and `preemption`") for key in unknown])
    try:
        section = SchedulerSpec.model_validate(data, strict=True)
    except ValidationError as err:
        raise SpecInvalidError(source, [at(format_path(e["loc"]), e["msg"])
                                        for e in err.errors()]) from None
    issues = [at(i.path, i.message)
              for i in queue_issues(section.queues, "queues", section.cohorts, "cohorts")]
    if issues:
        raise SpecInvalidError(source, issues)
    return _from_scheduler_section(section, f"{path} queues")


def resolve(jobs: Sequence[Job], config: QueueConfig,
            source: str | None = None) -> tuple[list[str], list[int]]:
    """Each job's queue and priority, as the scheduler would see them; a queue that is
    not configured is an error naming the trace line and column (``source``: the trace)."""
    names = {q.name for q in config.queues}
    ceilings = {name: config.ceiling(name) for name in names}
    queues, priorities = [], []
    for job in jobs:
        queue = job.queue or config.default
        where = (f"{source}:{job.line}: column 'queue'" if source and job.line
                 else f"{job.where()}: queue")
        if config.configured and queue not in names:  # even `default`: never invented
            raise WorkloadError(
                f"{where}: {queue!r} is not a queue of {config.source}: add it there or "
                f"use one of {', '.join(sorted(names))}")
        cap = ceilings.get(queue)
        if cap is not None and job.gpus > cap:
            raise WorkloadError(  # its quota would hold it forever
                f"{where}: the job needs {job.gpus} GPUs, queue {queue!r} can never hold "
                f"more than {cap} (nominalQuota, cohort, borrowingLimit of {config.source})")
        queues.append(queue)
        priority = job.priority
        priorities.append(priority if priority is not None
                          else config.priorities.get(queue, 0))
    return queues, priorities
