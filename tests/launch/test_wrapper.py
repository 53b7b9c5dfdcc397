"""`trainmaster launch` with real subprocesses: transparency (output, exit code, signals)
and what it reports, first to a recording sink, then to a real TrainingJob."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, job_doc, operator_env, wait_for
from trainmaster.launch import LaunchConfig, run_launch

ROOT = Path(__file__).resolve().parents[2]

# A stand-in training script: logs, writes two checkpoints (one with a marker file, one
# that only settles), and exits with the code it is given.
TRAINER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    ckpt = Path(os.environ["TRAINMASTER_CHECKPOINT_DIR"])
    print("step 100", flush=True)
    (ckpt / "checkpoint-100").mkdir()
    (ckpt / "checkpoint-100" / "model.bin").write_bytes(b"w" * 1000)
    (ckpt / "checkpoint-100" / "COMPLETE").touch()
    time.sleep(1.0)
    Path(os.environ["TRAINMASTER_HEARTBEAT_FILE"]).touch()
    (ckpt / "checkpoint-200.tmp").mkdir()
    (ckpt / "checkpoint-200.tmp" / "model.bin").write_bytes(b"w" * 1000)
    (ckpt / "checkpoint-200.tmp").rename(ckpt / "checkpoint-200")
    print("step 200", file=sys.stderr, flush=True)
    time.sleep(float(sys.argv[2]))
    sys.exit(int(sys.argv[1]))
""")


class Recorder:
    def __init__(self) -> None:
        self.beats: list[datetime] = []
        self.checkpoints: list[tuple[str, int]] = []
        self.resumes: list[tuple[str, int, int]] = []
        self.restarts: list[tuple[float, int, datetime]] = []

    def heartbeat(self, when: datetime) -> bool:
        self.beats.append(when)
        return True

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        self.checkpoints.append((path, step))
        return True

    def resumed(self, path: str, step: int, attempt: int, when: datetime) -> bool:
        self.resumes.append((path, step, attempt))
        return True

    def restarted(self, seconds: float, attempt: int, when: datetime) -> bool:
        self.restarts.append((seconds, attempt, when))
        return True


def _config(ckpt: Path) -> LaunchConfig:
    return LaunchConfig(job="gpt", namespace="ns", rank=0, checkpoint_dir=ckpt,
                        heartbeat_seconds=0.2, settle_seconds=0.5, poll_seconds=0.1)


def test_the_command_runs_unchanged_and_its_checkpoints_are_reported(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    sink = Recorder()
    os.environ["TRAINMASTER_CHECKPOINT_DIR"] = str(ckpt)
    try:
        code = run_launch(_config(ckpt), [sys.executable, str(script), "3", "1.5"], sink)
    finally:
        del os.environ["TRAINMASTER_CHECKPOINT_DIR"]
    assert code == 3
    out, err = capfd.readouterr()
    assert "step 100" in out and "step 200" in err
    assert sink.checkpoints == [(str(ckpt / "checkpoint-100"), 100),
                                (str(ckpt / "checkpoint-200"), 200)]
    assert len(sink.beats) >= 2
    assert sink.beats == sorted(sink.beats)


# Loads its "checkpoint" for 1.5 s, then steps twice.
SLOW_START = "import time; time.sleep(1.5); print('step 301', flush=True); " \
             "time.sleep(0.5); print('step 302', flush=True)"


def test_a_resumed_attempt_reports_the_time_to_its_first_step_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINMASTER_RESUME_FROM", "/ckpt/checkpoint-300")
    # The last attempt's progress file, an hour old: not this attempt's first step.
    stale = tmp_path / "progress"
    stale.write_text("250")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("TRAINMASTER_PROGRESS_FILE", str(stale))
    config = LaunchConfig(job="gpt", namespace="ns", rank=0, attempt=2,
                          heartbeat_seconds=0.2, poll_seconds=0.1)
    sink = Recorder()
    before = time.time()
    assert run_launch(config, [sys.executable, "-c", SLOW_START], sink) == 0
    after = time.time()
    assert len(sink.restarts) == 1  # the first step only, not the second
    seconds, attempt, when = sink.restarts[0]
    assert attempt == 2
    # From the launcher's start to `step 301`: the 1.5 s load and the interpreter's start,
    # not the 0.5 s to the second step.
    assert 1.5 <= seconds < after - before - 0.4
    assert before + seconds <= when.timestamp() <= after


def test_a_fresh_attempt_reports_no_restart(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.delenv("TRAINMASTER_RESUME_FROM", raising=False)
    monkeypatch.setenv("TRAINMASTER_PROGRESS_FILE", str(tmp_path / "progress"))
    config = LaunchConfig(job="gpt", namespace="ns", rank=0, heartbeat_seconds=0.2,
                          poll_seconds=0.1)
    sink = Recorder()
    assert run_launch(config, [sys.executable, "-c", SLOW_START], sink) == 0
    assert sink.beats and sink.restarts == []


def test_a_signal_reaches_the_command_and_shapes_the_exit_code(tmp_path: Path) -> None:
    """The wrapper as the pod's main process: SIGTERM (pod deletion) is passed on."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmaster", "launch", "--", sys.executable, "-c",
         "import time; print('ready', flush=True); time.sleep(60)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRAINMASTER_")},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_missing_command_exits_127(tmp_path: Path) -> None:
    config = LaunchConfig(job=None, namespace=None)
    assert run_launch(config, [str(tmp_path / "no-such-program")]) == 127


def test_only_rank_zero_reports_unless_asked() -> None:
    base = {"TRAINMASTER_JOB": "gpt", "TRAINMASTER_NAMESPACE": "ml"}
    assert LaunchConfig.from_env({**base, "JOB_COMPLETION_INDEX": "0"}).reports
    assert not LaunchConfig.from_env({**base, "JOB_COMPLETION_INDEX": "3"}).reports
    assert LaunchConfig.from_env({**base, "JOB_COMPLETION_INDEX": "3"}, all_ranks=True).reports
    assert not LaunchConfig.from_env({"JOB_COMPLETION_INDEX": "0"}).reports
    # Under torchrun every local process has JOB_COMPLETION_INDEX; RANK tells them apart.
    assert not LaunchConfig.from_env({**base, "JOB_COMPLETION_INDEX": "0", "RANK": "5"}).reports
    assert LaunchConfig.from_env({**base, "JOB_COMPLETION_INDEX": "0", "RANK": "0"}).reports


@pytest.fixture()
def trainingjob(cluster: LocalCluster, tmp_path: Path) -> Iterator[OperatorEnv]:
    """A TrainingJob to report to; no operator needed for the launcher's side."""
    with operator_env(cluster.kubeconfig, cluster.spec, tmp_path, start=False) as env:
        env.create_job(job_doc("gpt", nodes=1))
        yield env


@pytest.mark.integration
def test_the_wrapper_reports_to_the_trainingjob(trainingjob: OperatorEnv, tmp_path: Path
                                                ) -> None:
    env = trainingjob
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    child_env = {
        **os.environ,
        "KUBECONFIG": str(env.kubeconfig),
        "TRAINMASTER_JOB": "gpt",
        "TRAINMASTER_NAMESPACE": env.namespace,
        "TRAINMASTER_CHECKPOINT_DIR": str(ckpt),
        "JOB_COMPLETION_INDEX": "0",
    }
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "trainmaster", "launch", "--heartbeat-seconds", "0.2",
         "--settle-seconds", "0.5", "--", sys.executable, str(script), "7", "2"],
        cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 7, result.stderr
    assert "step 100" in result.stdout and "step 200" in result.stderr
    assert "could not report" not in result.stderr
    status = wait_for(lambda: (s := env.status("gpt")).get("lastCheckpoint") and s,
                      "the reports")
    assert status["lastCheckpoint"]["path"] == str(ckpt / "checkpoint-200")
    assert status["lastCheckpoint"]["step"] == 200
    beat = datetime.fromisoformat(status["lastHeartbeat"])
    assert beat.timestamp() >= started - 1


@pytest.mark.integration
def test_the_bundle_reports_through_the_service_account(trainingjob: OperatorEnv,
                                                        tmp_path: Path) -> None:
    """The bundle as it runs in a gang pod: a bare Python, the job's own ServiceAccount
    token and the cluster CA, urllib to the real API server; the Role of the job's
    identity lets it patch its TrainingJob's status."""
    import base64
    import shutil
    from urllib.parse import urlsplit

    import yaml

    from trainmaster.kubeclient import api_path
    from trainmaster.launch import write_bundle
    from trainmaster.objects import build_job_identity, trainer_account
    from trainmaster.spec import Job

    env = trainingjob
    job = Job.model_validate(job_doc("gpt", nodes=1))
    for obj in build_job_identity(env.spec, job):
        env.kube.apply(obj)
    account = trainer_account(job)
    token = env.kube.post(api_path("v1", "serviceaccounts", env.namespace, account, "token"),
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": 600}})["status"]["token"]
    config = yaml.safe_load(env.kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(token)
    if "certificate-authority-data" in cluster:
        (mount / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        shutil.copy(cluster["certificate-authority"], mount / "ca.crt")
    server = urlsplit(cluster["server"])
    bundle = write_bundle(tmp_path / "launcher")
    bare = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    result = subprocess.run(
        [bare, "-I", str(bundle), "--heartbeat-seconds", "0.2", "--settle-seconds", "0.5",
         "--", bare, str(script), "0", "2"],
        env={"PATH": "/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": server.hostname or "",
             "KUBERNETES_SERVICE_PORT": str(server.port or 443),
             "TRAINMASTER_SERVICE_ACCOUNT_DIR": str(mount), "TRAINMASTER_JOB": "gpt",
             "TRAINMASTER_NAMESPACE": env.namespace, "TRAINMASTER_CHECKPOINT_DIR": str(ckpt),
             "JOB_COMPLETION_INDEX": "0"},
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "could not report" not in result.stderr, result.stderr
    status = wait_for(lambda: (s := env.status("gpt")).get("lastCheckpoint") and s,
                      "the reports")
    assert status["lastCheckpoint"]["path"] == str(ckpt / "checkpoint-200")
    assert status["lastCheckpoint"]["step"] == 200
