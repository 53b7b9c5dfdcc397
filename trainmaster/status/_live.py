"""A job's live progress from Prometheus, when one scrapes the launchers: its step, step
rate and the time since its last checkpoint, per (namespace, TrainingJob).

`trainmaster status` and the UI's jobs view both take a job's figures from
`job_progress`: Prometheus's when it has series for the job, else what they showed
before (the TrainingJob's `status.lastCheckpoint`, and in the UI the step rate between
the checkpoints it saw arrive). The launcher's series (trainmaster.launch._metrics) carry
`trainingjob`; the scrape adds `namespace`.

Where Prometheus is: a URL given (`--prometheus`), else the pod of a Prometheus the
Prometheus operator runs in the cluster (labels `app.kubernetes.io/name=prometheus`,
`app.kubernetes.io/managed-by=prometheus-operator`), at its pod IP and its `web` port.
A pod IP answers from the cluster's own network, and from this host for the local real
nodes; elsewhere give `--prometheus` (a port-forward, an ingress).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainmaster.errors import TrainmasterError
from trainmaster.kubeclient import ApiError, SyncKube, pod_path

JobKey = tuple[str, str]
"""(namespace, TrainingJob name)."""

RATE_WINDOW = "2m"
"""The step rate's window: eight 15 s scrapes, so one late scrape barely moves it."""
BY_JOB = "max by (namespace, trainingjob)"
QUERIES = {
    "step": f"{BY_JOB} (trainmaster_job_step)",
    # The step is a gauge that only grows within one pod (a restart brings new pods, so
    # new series): its slope, not rate(), which would read a drop as a counter reset.
    "rate": f"{BY_JOB} (deriv(trainmaster_job_step[{RATE_WINDOW}]))",
    # 0 until the launcher saw its first checkpoint: those series are left out.
    "checkpoint_age": "time() - " + BY_JOB
    + " (trainmaster_job_last_checkpoint_timestamp_seconds > 0)",
}
PROMETHEUS_POD_SELECTOR = ("app.kubernetes.io/name=prometheus,"
                           "app.kubernetes.io/managed-by=prometheus-operator")
PROMETHEUS = "Prometheus"
TRAININGJOB = "TrainingJob"


class PrometheusError(TrainmasterError):
    """Prometheus did not answer, or answered with an error."""


@dataclass(frozen=True)
class LiveProgress:
    step: int | None
    step_rate: float | None
    """Steps per second over RATE_WINDOW."""
    checkpoint_age: float | None
    """Seconds since the launcher found the newest checkpoint complete."""


@dataclass(frozen=True)
class Progress:
    """What a view shows of a job's progress, and where it came from."""

    step: int | None
    step_rate: float | None
    checkpoint_age: float | None
    source: str
    """PROMETHEUS or TRAININGJOB."""


def progress_from_results(results: Mapping[str, Sequence[Mapping[str, Any]]]
                          ) -> dict[JobKey, LiveProgress]:
    """The three queries' vectors (QUERIES' keys -> Prometheus' `result` lists), by job."""
    values: dict[JobKey, dict[str, float]] = {}
    for name, series in results.items():
        for s in series:
            metric = s.get("metric") or {}
            key = (str(metric.get("namespace", "")), str(metric.get("trainingjob", "")))
            if not key[1]:
                continue
            try:
                value = float(s["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if value == value:  # NaN: no answer
                values.setdefault(key, {})[name] = value
    out = {}
    for key, got in values.items():
        step = got.get("step")
        rate = got.get("rate")
        out[key] = LiveProgress(
            step=int(step) if step is not None else None,
            step_rate=max(0.0, rate) if rate is not None else None,
            checkpoint_age=max(0.0, got["checkpoint_age"]) if "checkpoint_age" in got
            else None)
    return out


def query(url: str, promql: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """An instant query's vector at `url` (Prometheus' base URL)."""
    full = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(full, timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        raise PrometheusError(f"Prometheus at {url} did not answer: {exc}") from None
    if doc.get("status") != "success" or (doc.get("data") or {}).get("resultType") != "vector":
        raise PrometheusError(f"Prometheus at {url}: {doc.get('error') or doc}")
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def live_progress(url: str, timeout: float = 5.0) -> dict[JobKey, LiveProgress]:
    """Every job's live progress as the Prometheus at `url` has it (empty: no launcher
    series). Raises PrometheusError when it does not answer."""
    return progress_from_results({name: query(url, q, timeout) for name, q in QUERIES.items()})


def is_prometheus_pod(pod: Mapping[str, Any]) -> bool:
    """A pod of a Prometheus the Prometheus operator runs (PROMETHEUS_POD_SELECTOR)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in
               (pair.split("=", 1) for pair in PROMETHEUS_POD_SELECTOR.split(",")))


def prometheus_url(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The URL of the first Running Prometheus pod (its IP, its `web` port)."""
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        status = pod.get("status") or {}
        ip = status.get("podIP")
        if status.get("phase") != "Running" or not ip:
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            for port in container.get("ports") or []:
                if port.get("name") == "web":
                    return f"http://{ip}:{port['containerPort']}"
    return None


def discover_prometheus(kube: SyncKube) -> str | None:
    """The Prometheus the operator runs in the cluster, if the kubeconfig may see it."""
    try:
        pods = kube.list(pod_path(), PROMETHEUS_POD_SELECTOR)
    except ApiError:
        return None
    return prometheus_url(pods)


def job_progress(live: Mapping[JobKey, LiveProgress] | None, namespace: str, name: str, *,
                 step: int | None, step_rate: float | None,
                 checkpoint_age: float | None) -> Progress:
    """The job's progress from Prometheus when it has the job, else the values given (the
    view's own source). A figure Prometheus lacks (no checkpoint yet, a rate before two
    scrapes) stays what the view had."""
    got = (live or {}).get((namespace, name))
    if got is None:
        return Progress(step, step_rate, checkpoint_age, TRAININGJOB)
    return Progress(
        step=got.step if got.step is not None else step,
        step_rate=got.step_rate if got.step_rate is not None else step_rate,
        checkpoint_age=got.checkpoint_age if got.checkpoint_age is not None
        else checkpoint_age,
        source=PROMETHEUS)
