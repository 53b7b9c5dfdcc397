"""The rendered alert rules, unit-tested by Prometheus's own `promtool test rules`.

promtool is built from Go modules (the pinned `promtool` tool family; minutes the first
time, cached after). Each case feeds series and says which alerts fire at which time, and
that the others do not: an alert missing from `exp_alerts` must not be firing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import stack_doc
from trainmaster.objects import build_monitoring
from trainmaster.spec import ClusterSpec, validate_data


@pytest.fixture(scope="session")
def promtool() -> Path:
    from trainmaster.toolchain import build, tool_path

    build(["promtool"])
    return tool_path("promtool")


def _spec(gpu_exporter: bool = True) -> ClusterSpec:
    doc = stack_doc("dev")
    doc.setdefault("monitoring", {})
    doc["monitoring"]["gpuExporter"] = {"enabled": gpu_exporter}
    doc["monitoring"]["alerts"] = {
        "xidErrors": True,
        "eccErrorsPerHour": 2,
        "noProgressMinutes": 30,
        "nodeNotReadyMinutes": 5,
    }
    return validate_data(doc, "test")


def _rule_groups(spec: ClusterSpec) -> dict[str, Any]:
    (rule,) = [o for o in build_monitoring(spec) if o["kind"] == "PrometheusRule"]
    groups: dict[str, Any] = rule["spec"]
    return groups


def _run(promtool: Path, tmp_path: Path, spec: ClusterSpec, tests: list[dict[str, Any]]) -> str:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rule_groups(spec)))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                        "tests": tests})
    )
    checked = subprocess.run([str(promtool), "check", "rules", "rules.yaml"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proc = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_gpu_node_not_ready_fires_after_its_delay_and_only_for_gpu_nodes(
    promtool: Path, tmp_path: Path
) -> None:
    ready = "trainmaster_operator_node_ready"
    gpus = "trainmaster_operator_node_gpus"
    tests = [{
        "interval": "1m",
        "input_series": [
            # gpu-1 goes NotReady at minute 2; gpu-2 stays Ready; cpu-1 (no GPUs) goes NotReady.
            {"series": f'{ready}{{node="gpu-1"}}', "values": "1 1 0x10"},
            {"series": f'{gpus}{{node="gpu-1"}}', "values": "8x12"},
            {"series": f'{ready}{{node="gpu-2"}}', "values": "1x12"},
            {"series": f'{gpus}{{node="gpu-2"}}', "values": "8x12"},
            {"series": f'{ready}{{node="cpu-1"}}', "values": "0x12"},
            {"series": f'{gpus}{{node="cpu-1"}}', "values": "0x12"},
        ],
        "alert_rule_test": [
            # NotReady for 4 minutes: pending, not firing (for: 5m).
            {"eval_time": "6m", "alertname": "GPUNodeNotReady", "exp_alerts": []},
            {"eval_time": "8m", "alertname": "GPUNodeNotReady", "exp_alerts": [{
                "exp_labels": {"node": "gpu-1", "severity": "critical"},
                "exp_annotations": {"summary": "node gpu-1 NotReady for 5 minutes"},
            }]},
        ],
    }]
    _run(promtool, tmp_path, _spec(), tests)


def test_node_nic_unhealthy_fires_after_a_minute_with_the_agents_reason(
        promtool: Path, tmp_path: Path) -> None:
    healthy = "trainmaster_nic_healthy"
    # gpu-1's agent turns unhealthy at 3m (a port down); gpu-2 flaps for one look at 3m only.
    tests = [{
        "interval": "1m",
        "input_series": [
            {"series": f'{healthy}{{node="gpu-1",reason="PortsActive"}}', "values": "1 1 1"},
            {"series": f'{healthy}{{node="gpu-1",reason="PortDown"}}',
             "values": "_ _ _ 0 0 0 0 0"},
            {"series": f'{healthy}{{node="gpu-2",reason="PortsActive"}}',
             "values": "1 1 1 0 1 1 1 1"},
        ],
        "alert_rule_test": [
            {"eval_time": "3m", "alertname": "NodeNICUnhealthy", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "NodeNICUnhealthy", "exp_alerts": [{
                "exp_labels": {"node": "gpu-1", "reason": "PortDown", "severity": "critical"},
                "exp_annotations": {
                    "summary": "node gpu-1's RDMA NICs are unhealthy: PortDown"},
            }]},
        ],
    }]
    _run(promtool, tmp_path, _spec(), tests)


def test_training_no_progress_fires_when_heartbeats_stop(promtool: Path, tmp_path: Path) -> None:
    beat = "trainmaster_job_last_heartbeat_timestamp_seconds"
    # One sample a minute; the value is the Unix time of the last heartbeat. Job "live" beats
    # every minute; job "stuck" last beat at t=60s and then repeats that timestamp.
    tests = [{
        "interval": "1m",
        "input_series": [
            {"series": f'{beat}{{namespace="ml",trainingjob="live"}}', "values": "0+60x50"},
            {"series": f'{beat}{{namespace="ml",trainingjob="stuck"}}', "values": "0 60x49"},
        ],
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "TrainingNoProgress", "exp_alerts": []},
            {"eval_time": "32m", "alertname": "TrainingNoProgress", "exp_alerts": [{
                "exp_labels": {"namespace": "ml", "trainingjob": "stuck", "severity": "warning"},
                "exp_annotations": {"summary": "job stuck made no progress for 30 minutes"},
            }]},
        ],
    }]
    _run(promtool, tmp_path, _spec(), tests)


def test_training_gang_restarted_fires_at_the_restart_and_clears_after_its_window(
    promtool: Path, tmp_path: Path
) -> None:
    attempt = "trainmaster_job_attempt"
    # Job "flaky": attempt 0's two ranks stop reporting at minute 5 (killed), attempt 1's
    # pods report from minute 6. Job "steady" never restarts.
    tests = [{
        "interval": "1m",
        "input_series": [
            {"series": f'{attempt}{{namespace="ml",trainingjob="flaky",pod="flaky-r0-0"}}',
             "values": "0x5"},
            {"series": f'{attempt}{{namespace="ml",trainingjob="flaky",pod="flaky-r0-1"}}',
             "values": "0x5"},
            {"series": f'{attempt}{{namespace="ml",trainingjob="flaky",pod="flaky-r1-0"}}',
             "values": "_x6 1x30"},
            {"series": f'{attempt}{{namespace="ml",trainingjob="steady",pod="steady-r0-0"}}',
             "values": "0x36"},
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "TrainingGangRestarted", "exp_alerts": []},
            {"eval_time": "6m", "alertname": "TrainingGangRestarted", "exp_alerts": [{
                "exp_labels": {"namespace": "ml", "trainingjob": "flaky",
                               "severity": "warning"},
                "exp_annotations": {
                    "summary": "job flaky's gang restarted (attempt 1) in the last 15m"},
            }]},
            # Attempt 0's last sample (minute 5) leaves the 15-minute window after minute 20.
            {"eval_time": "21m", "alertname": "TrainingGangRestarted", "exp_alerts": []},
        ],
    }]
    _run(promtool, tmp_path, _spec(), tests)


def test_gpu_error_alerts_fire_on_xid_and_on_ecc_rate(promtool: Path, tmp_path: Path) -> None:
    tests = [{
        "interval": "1m",
        "input_series": [
            {"series": 'DCGM_FI_DEV_XID_ERRORS{Hostname="gpu-1",gpu="3"}', "values": "0 0 79x5"},
            {"series": 'DCGM_FI_DEV_XID_ERRORS{Hostname="gpu-2",gpu="0"}', "values": "0x7"},
            # gpu-1: 1 double-bit error in the hour (under the threshold of 2); gpu-2: 3.
            {"series": 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname="gpu-1"}', "values": "0x3 1x60"},
            {"series": 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname="gpu-2"}', "values": "0x3 3x60"},
        ],
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "GPUXidError", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "GPUXidError", "exp_alerts": [{
                "exp_labels": {"Hostname": "gpu-1", "gpu": "3", "severity": "critical"},
                "exp_annotations": {"summary": "GPU 3 on gpu-1 reported Xid 79"},
            }]},
            {"eval_time": "2m", "alertname": "GPUEccDoubleBitErrors", "exp_alerts": []},
            {"eval_time": "10m", "alertname": "GPUEccDoubleBitErrors", "exp_alerts": [{
                "exp_labels": {"Hostname": "gpu-2", "severity": "critical"},
                "exp_annotations": {"summary": "double-bit ECC errors on gpu-2"},
            }]},
        ],
    }]
    _run(promtool, tmp_path, _spec(), tests)


def test_a_wrong_expectation_fails(promtool: Path, tmp_path: Path) -> None:
    """The harness is not vacuous: expecting a healthy node to alert makes promtool fail."""
    tests = [{
        "interval": "1m",
        "input_series": [
            {"series": 'trainmaster_operator_node_ready{node="gpu-2"}', "values": "1x12"},
            {"series": 'trainmaster_operator_node_gpus{node="gpu-2"}', "values": "8x12"},
        ],
        "alert_rule_test": [{"eval_time": "10m", "alertname": "GPUNodeNotReady",
                             "exp_alerts": [{"exp_labels": {"node": "gpu-2",
                                                            "severity": "critical"}}]}],
    }]
    with pytest.raises(AssertionError, match="GPUNodeNotReady"):
        _run(promtool, tmp_path, _spec(), tests)


def test_without_the_gpu_exporter_no_rule_reads_dcgm_series() -> None:
    groups = _rule_groups(_spec(gpu_exporter=False))
    names = {r["alert"] for g in groups["groups"] for r in g["rules"]}
    assert names == {"TrainingNoProgress", "TrainingGangRestarted", "GPUNodeNotReady",
                     "NodeNICUnhealthy"}
