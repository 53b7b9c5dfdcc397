"""A job's live progress from Prometheus (trainmaster.status._live): the answers of its
three queries read per job, where the Prometheus pod is, and the one function through
which `trainmaster status` and the UI's jobs view take Prometheus' figures or fall back to
the TrainingJob's. Against a live Prometheus: tests/cluster/test_real_monitoring.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.ui.world import T0, at
from trainmaster.status import (
    PROMETHEUS,
    TRAININGJOB,
    JobRow,
    LiveProgress,
    PrometheusError,
    ResourceView,
    is_prometheus_pod,
    job_progress,
    live_progress,
    progress_from_results,
    prometheus_url,
    with_live_progress,
)
from trainmaster.status._live import QUERIES
from trainmaster.ui import World, job_info


def _series(ns: str, job: str, value: str) -> dict[str, Any]:
    return {"metric": {"namespace": ns, "trainingjob": job}, "value": [1767268800.0, value]}


def test_the_three_queries_are_read_per_job() -> None:
    live = progress_from_results({
        "step": [_series("ml", "gpt", "412"), _series("ml", "bert", "7")],
        "rate": [_series("ml", "gpt", "3.98"), _series("ml", "bert", "NaN")],
        "checkpoint_age": [_series("ml", "gpt", "12.5")],
    })
    assert live[("ml", "gpt")] == LiveProgress(step=412, step_rate=3.98, checkpoint_age=12.5)
    # No rate yet (fewer than two scrapes: NaN) and no checkpoint yet: unknown, not 0.
    assert live[("ml", "bert")] == LiveProgress(step=7, step_rate=None, checkpoint_age=None)


def test_the_queries_group_by_namespace_and_trainingjob() -> None:
    for promql in QUERIES.values():
        assert "by (namespace, trainingjob)" in promql
    assert "deriv(trainmaster_job_step[" in QUERIES["rate"]
    assert "> 0" in QUERIES["checkpoint_age"]  # never "55 years since the last checkpoint"


def test_prometheus_figures_win_and_missing_ones_fall_back() -> None:
    live = {("ml", "gpt"): LiveProgress(step=412, step_rate=4.0, checkpoint_age=None)}
    got = job_progress(live, "ml", "gpt", step=400, step_rate=None, checkpoint_age=30.0)
    assert (got.step, got.step_rate, got.checkpoint_age, got.source) == (
        412, 4.0, 30.0, PROMETHEUS)
    other = job_progress(live, "ml", "bert", step=5, step_rate=0.5, checkpoint_age=9.0)
    assert (other.step, other.step_rate, other.checkpoint_age, other.source) == (
        5, 0.5, 9.0, TRAININGJOB)
    assert job_progress(None, "ml", "gpt", step=1, step_rate=None,
                        checkpoint_age=None).source == TRAININGJOB


def _prom_pod(name: str, ip: str | None, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "monitoring", "labels": {
                "app.kubernetes.io/name": "prometheus",
                "app.kubernetes.io/managed-by": "prometheus-operator"}},
            "spec": {"containers": [
                {"name": "config-reloader", "ports": [{"name": "reloader-web",
                                                       "containerPort": 8080}]},
                {"name": "prometheus", "ports": [{"name": "web", "containerPort": 9090}]}]},
            "status": {"phase": phase, "podIP": ip}}


def test_the_prometheus_pod_is_found_by_its_labels_ip_and_web_port() -> None:
    pods = [_prom_pod("prometheus-trainmaster-1", None, "Pending"),
            _prom_pod("prometheus-trainmaster-0", "10.244.0.9")]
    assert all(is_prometheus_pod(p) for p in pods)
    assert not is_prometheus_pod({"metadata": {"labels": {"app.kubernetes.io/name":
                                                          "prometheus"}}})
    assert prometheus_url(pods) == "http://10.244.0.9:9090"
    assert prometheus_url(pods[:1]) is None


def test_a_prometheus_that_does_not_answer_is_an_error_not_a_hang() -> None:
    # A closed port on loopback: refused at once.
    with pytest.raises(PrometheusError, match="did not answer"):
        live_progress("http://127.0.0.1:9", timeout=2)


def test_status_rows_take_the_live_figures() -> None:
    row = JobRow(namespace="ml", name="gpt", phase="Running", restarts=0, attempt=0, nodes=2,
                 checkpoint="/ckpt/step-400", step=400, age_seconds=600.0,
                 checkpoint_age=45.0)
    idle = JobRow(namespace="ml", name="bert", phase="Pending", restarts=0, attempt=None,
                  nodes=1, checkpoint=None, step=None, age_seconds=5.0)
    view = ResourceView(levels=[], jobs=[row, idle])
    live = {("ml", "gpt"): LiveProgress(step=431, step_rate=3.9, checkpoint_age=4.0)}
    with_live_progress(view, live, "from http://prom:9090")
    assert (row.current_step, row.step, row.step_rate, row.checkpoint_age,
            row.progress_from) == (431, 400, 3.9, 4.0, PROMETHEUS)
    assert (idle.current_step, idle.step_rate, idle.progress_from) == (None, None, TRAININGJOB)
    assert view.progress_note == "from http://prom:9090"


def test_the_ui_jobs_view_takes_them_through_the_same_function() -> None:
    tj = {"metadata": {"name": "gpt", "namespace": "ml", "creationTimestamp": at(0)},
          "spec": {"nodes": 2, "gpusPerPod": 8},
          "status": {"phase": "Running", "attempt": 0,
                     "lastCheckpoint": {"path": "/ckpt/step-400", "step": 400,
                                        "time": at(500)}}}
    now = T0 + timedelta(seconds=600)
    before = job_info(tj, World(trainingjobs=[tj], now=now))
    assert (before.step, before.step_rate, before.checkpoint_age, before.progress_from) == (
        400, None, 100.0, TRAININGJOB)
    live = {("ml", "gpt"): LiveProgress(step=431, step_rate=3.9, checkpoint_age=4.0)}
    after = job_info(tj, World(trainingjobs=[tj], now=now, live=live))
    assert (after.step, after.step_rate, after.checkpoint_age, after.progress_from) == (
        431, 3.9, 4.0, PROMETHEUS)
