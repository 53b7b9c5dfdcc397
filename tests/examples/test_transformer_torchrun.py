"""The PyTorch example (examples/transformer) under the real torchrun, without a cluster:
two "pods" on loopback, each running the launch script trainmaster renders for a torchrun
job (bash -> the launcher bundle -> torchrun --nnodes=2 --nproc-per-node=1, c10d
rendezvous hosted by pod 0 -> train.py, DDP over gloo, DCP checkpoints). The loss falls; a
killed worker is restarted in place by torchrun (the pods go on) and resumes at the last
checkpoint; a gang of another world size resumes the step; an elastic gang shrinks when
its store pod is lost and grows back when the replacement joins; the launcher's metrics
follow the steps and stop with a hung worker; `bench recovery --torch` times the kill.
(One at a time: each is CPU heavy.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT, stack_doc
from trainmaster.bench import LoopbackPod as Pod
from trainmaster.cluster import free_port
from trainmaster.drill import story_shards
from trainmaster.launch import write_bundle
from trainmaster.objects import build_gang_job, render_launch_script
from trainmaster.spec import ClusterSpec, load_spec_text

TRAIN = ROOT / "examples" / "transformer" / "train.py"
pytestmark = pytest.mark.timeout(900)


def _spec(nodes: int, steps: int, elastic: tuple[int, int] | None = None,
          container_restart: str = "gang") -> ClusterSpec:
    doc = stack_doc("dev")
    doc["jobs"].append({
        "name": "lm", "image": "trainmaster.local/torch:2.15.0", "launcher": "torchrun",
        "nodes": nodes, "gpusPerPod": 8, "cpuPerPod": 1, "memoryPerPod": "2Gi",
        "command": ["python", str(TRAIN)],
        "hyperParameters": {"trainSteps": steps, "checkpointEvery": 10},
        "arguments": {"hyperParameter": "--{name} {value}"},
        # CPU-only: one worker per pod (its GPUs are only the node's whole-node share).
        "env": {"NPROC_PER_NODE": "1"},
        "checkpoint": {"volume": "checkpoints", "path": "/checkpoints/lm"},
        "restartPolicy": {"maxRestarts": 3, "containerRestart": container_restart},
        **({"elastic": {"minNodes": elastic[0], "maxNodes": elastic[1]}} if elastic else {}),
    })
    return load_spec_text(yaml.safe_dump(doc), "dev.yaml")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lm")
    data = root / "data" / "tinystories"  # what the cache mounts at /data/<dataset>
    data.mkdir(parents=True)
    for i, shard in enumerate(story_shards()):
        (data / f"shard-{i:03d}.txt").write_bytes(shard)
    return {"root": root, "data": data, "bundle": write_bundle(root / "launcher")}


def _pod_env(spec: ClusterSpec, index: int, port: int, ckpt: Path,
             world: dict[str, Path]) -> dict[str, str]:
    gang = build_gang_job(spec, spec.job("lm"), attempt=1)
    container = gang["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env.update({
        "JOB_COMPLETION_INDEX": str(index),  # the Indexed Job's
        "MASTER_ADDR": "127.0.0.1",  # pod 0's name under the headless Service, here
        "TRAINMASTER_RDZV_PORT": str(port),
        "TRAINMASTER_GANG_UID": f"test-{port}",  # the rendezvous id
        "TRAINMASTER_CHECKPOINT_DIR": str(ckpt),
        "TRAINMASTER_LAUNCHER": str(world["bundle"]),  # what the init container writes
        "TRAINMASTER_JOB": "",  # no TrainingJob to report to here
        "TRAINMASTER_METRICS_PORT": "",
        "TM_HP_DATA_DIR": str(world["data"]),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/tmp"),
    })
    return env


@pytest.fixture
def gang(world: dict[str, Path], tmp_path: Path) -> Iterator[Any]:
    started: list[Pod] = []

    def start(spec: ClusterSpec, ckpt: Path, extra_env: dict[str, str] | None = None,
              indexes: list[int] | None = None, port: int | None = None) -> list[Pod]:
        script = tmp_path / f"launch-{len(started)}.sh"
        script.write_text(render_launch_script(spec.job("lm")))
        port = port or free_port()
        pods = []
        for index in range(spec.job("lm").nodes) if indexes is None else indexes:
            env = {**_pod_env(spec, index, port, ckpt, world), **(extra_env or {})}
            proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env,
                                    start_new_session=True)
            pod = Pod(proc)
            threading.Thread(target=pod.read, daemon=True).start()
            pods.append(pod)
        started.extend(pods)
        return pods

    yield start
    for pod in started:
        pod.kill()
        pod.proc.wait(30)
    if os.environ.get("TRAINMASTER_TEST_POD_LOG"):  # every pod's output, to read a failure
        with open(os.environ["TRAINMASTER_TEST_POD_LOG"], "a") as log:
            for i, pod in enumerate(started):
                log.writelines(f"pod {i} {at:.1f} {line}\n" for at, line in pod.lines)


def test_the_transformer_trains_and_a_killed_worker_restarts_in_place(
        gang: Any, tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    pods = gang(_spec(nodes=2, steps=100_000), ckpt)
    # torchrun started one worker per pod, ranked by the rendezvous (not by pod index).
    rank0 = next(p for p in pods if p.match(r"^rank (\d) of 2: pid")[1] == "0")
    rank1 = next(p for p in pods if p is not rank0)
    pid = int(rank1.match(r"^rank 1 of 2: pid (\d+)")[1])
    rank0.match(r"^checkpoint .*step-30 \(step 30\)")
    rank0.match(r"^step 35 loss")
    before = rank0.steps()
    first, last = [loss for _, loss in before[:5]], [loss for _, loss in before[-5:]]
    print(f"loss: steps 1-5 {first}, steps {before[-5][0]}-{before[-1][0]} {last}")
    assert sum(last) / 5 < sum(first) / 5 - 0.5  # it learns: bytes become predictable

    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)  # one worker process dies; its pod does not
    resumed = rank0.match(r"^rank 0: resumed from (.*step-(\d+)) at step (\d+) \(world "
                             r"size 2\)", after=killed_at)
    last_checkpoint = max(step for step, _ in before if step % 10 == 0 and step <= 35)
    assert int(resumed[3]) >= last_checkpoint  # no steps lost beyond the last checkpoint
    again = int(resumed[3]) + 1
    rank0.match(rf"^step {again} loss", after=killed_at)
    training_again = rank0.at(rf"^step {again} loss", after=killed_at) - killed_at
    restarted = rank1.match(r"^rank 1 of 2: pid (\d+), torchrun restart (\d+)",
                               after=killed_at)
    assert int(restarted[1]) != pid and int(restarted[2]) >= 1  # a new worker, same pod
    assert all(p.proc.poll() is None for p in pods)  # no pod ended: torchrun restarted it
    # The restarted workers came from the agent's forkserver, torch already imported.
    assert all(p.at(r"torchrun's workers fork from a server that imported torch") for p in pods)
    # Where the time goes: torchrun's restart and rendezvous until the new workers run
    # (their first line comes after the process group and the model are built), then the
    # load. (The healthy pod's agent restarts its worker too: as a failure when its worker
    # saw the peer's connection close first, else as a membership change.)
    for pod in pods:
        pod.match(r"^rank \d of 2: pid \d+, torchrun restart", after=killed_at)
    started = max(p.at(r"^rank \d of 2: pid \d+, torchrun restart", killed_at)
                  for p in pods) - killed_at
    loaded = rank0.at(r"^rank 0: resumed from", killed_at) - killed_at
    print(f"worker killed at step {before[-1][0]}: resumed from step {resumed[3]}, training "
          f"again (step {again}) {training_again:.1f} s after the kill (new workers up "
          f"{started:.1f} s, checkpoint loaded {loaded:.1f} s)")


def test_a_gang_of_another_world_size_resumes_the_step(gang: Any, tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    two = gang(_spec(nodes=2, steps=20), ckpt)
    for pod in two:
        assert pod.proc.wait(600) == 0, "\n".join(line for _, line in pod.lines[-30:])
    assert (ckpt / "step-20" / "COMPLETE").exists()
    assert (ckpt / "step-20" / ".metadata").exists()  # DCP's
    [one] = gang(_spec(nodes=1, steps=25), ckpt)
    assert one.proc.wait(600) == 0, "\n".join(line for _, line in one.lines[-30:])
    one.match(rf"^rank 0: resumed from {re.escape(str(ckpt))}/step-20 at step 20 "
                 r"\(world size 1\)")
    assert [step for step, _ in one.steps()] == [21, 22, 23, 24, 25]
    assert (ckpt / "step-25" / "COMPLETE").exists()


def test_a_lost_container_restarts_in_its_pod_and_rejoins_the_gangs_rendezvous(
        gang: Any, tmp_path: Path) -> None:
    """restartPolicy.containerRestart inPlace, as the kubelet carries it out: pod 1's
    container is lost whole (its processes killed) and started again in the same pod (the
    same environment, rendezvous id and endpoint). Pod 0's torchrun agent, whose worker
    failed with the lost peer, stays up and rendezvouses with the new agent once the lost
    one is dropped (keep-alive 1 s x 3); both ranks resume at the newest complete DCP
    checkpoint, no steps lost beyond it."""
    ckpt = tmp_path / "checkpoints"
    spec = _spec(nodes=2, steps=100_000, container_restart="inPlace")
    assert "keep_alive_interval=1" in render_launch_script(spec.job("lm"))
    port = free_port()
    pods = gang(spec, ckpt, port=port)
    rank0 = next(p for p in pods if p.match(r"^rank (\d) of 2: pid")[1] == "0")
    rank0.match(r"^checkpoint .*step-20 \(step 20\)")
    rank0.match(r"^step 23 loss")
    agent = pods[0].proc.pid
    lost_at = time.monotonic()
    pods[1].kill()  # the container, whole
    newest = max(int(d.name[5:]) for d in ckpt.glob("step-*") if (d / "COMPLETE").exists())
    pods[1].proc.wait(30)
    [again] = gang(spec, ckpt, indexes=[1], port=port)  # the kubelet starts it again
    restarted_at = time.monotonic()
    both = (pods[0], again)
    resumed = [p.match(r"^rank (\d): resumed from .*step-(\d+) at step (\d+) \(world "
                          r"size 2\)", after=restarted_at) for p in both]
    assert sorted(m[1] for m in resumed) == ["0", "1"]
    assert resumed[0][3] == resumed[1][3]  # both ranks from one checkpoint
    # The newest complete checkpoint: none is written while a rank is missing.
    assert int(resumed[0][3]) == newest, (resumed[0][3], newest)
    lead = next(p for p, m in zip(both, resumed, strict=True) if m[1] == "0")
    step = int(resumed[0][3]) + 1
    lead.match(rf"^step {step} loss", after=restarted_at)
    # Pod 0 went on throughout: the same agent, whose worker torchrun restarted.
    assert pods[0].proc.poll() is None and pods[0].proc.pid == agent
    assert int(pods[0].match(r"^rank \d of 2: pid \d+, torchrun restart (\d+)",
                                after=lost_at)[1]) >= 1
    up = again.at(r"^rank \d of 2: pid \d+, torchrun restart", restarted_at) - lost_at
    loaded = lead.at(r"^rank 0: resumed from", restarted_at) - lost_at
    print(f"container lost at step 23+: restarted in its pod, training again (step {step}) "
          f"{lead.at(rf'^step {step} loss', restarted_at) - lost_at:.1f} s after the loss "
          f"(restarted {restarted_at - lost_at:.1f} s, its workers up {up:.1f} s, "
          f"checkpoint loaded {loaded:.1f} s)")


def test_an_elastic_gang_survives_the_loss_of_the_store_pod_and_grows_back(
        gang: Any, tmp_path: Path) -> None:
    """Pod 0 hosts the c10d store; it is lost whole (its processes killed). The other pod's
    launcher elects itself, starts torchrun again in the same pod, and trains at world
    size 1 from the last checkpoint. Then pod 0's replacement (same index, as the Job makes
    it) finds that store and joins: the gang re-rendezvouses at world size 2 and trains on
    from the newest checkpoint."""
    ckpt = tmp_path / "checkpoints"
    spec = _spec(nodes=2, steps=100_000, elastic=(1, 2))
    port = free_port()
    # Pod i is 127.0.0.1i here (all of 127/8 is this machine), its store on one port.
    candidates = {"TRAINMASTER_RDZV_CANDIDATES": f"127.0.0.1{{index}}:{port}"}
    pods = gang(spec, ckpt, extra_env=candidates, port=port)  # one rendezvous id
    pods[1].match(r"rendezvous store: 127\.0\.0\.10:\d+ \(joining\)")
    rank0 = next(p for p in pods if p.match(r"^rank (\d) of 2: pid")[1] == "0")
    rank0.match(r"^checkpoint .*step-20 \(step 20\)")
    lost_at = time.monotonic()
    pods[0].kill()  # pod 0, the store's host, is gone
    pods[1].match(r"rendezvous store: 127\.0\.0\.10:\d+ is gone; electing again",
                     after=lost_at)
    pods[1].match(r"rendezvous store: 127\.0\.0\.11:\d+ \(this pod hosts it\)",
                     after=lost_at)
    shrunk = pods[1].match(r"^rank 0: resumed from .*step-(\d+) at step (\d+) \(world "
                              r"size 1\)", after=lost_at)
    again = int(shrunk[2]) + 1
    pods[1].match(rf"^step {again} loss", after=lost_at)
    print(f"store pod lost: training again at world size 1 (step {again}) "
          f"{pods[1].at(rf'^step {again} loss', lost_at) - lost_at:.1f} s later")
    pods[1].match(r"^checkpoint .*step-(\d+) ", after=lost_at)  # a step at size 1 saved

    joined_at = time.monotonic()
    [replacement] = gang(spec, ckpt, extra_env=candidates, indexes=[0], port=port)
    replacement.match(r"rendezvous store: 127\.0\.0\.11:\d+ \(joining\)")
    grown = [p.match(r"^rank (\d): resumed from .*step-(\d+) at step (\d+) \(world "
                        r"size 2\)", after=joined_at) for p in (pods[1], replacement)]
    assert sorted(m[1] for m in grown) == ["0", "1"]
    assert grown[0][3] == grown[1][3]  # both ranks from one checkpoint
    assert int(grown[0][3]) > int(shrunk[2])  # the steps trained at size 1 are kept
    lead = next(p for p, m in zip((pods[1], replacement), grown, strict=True) if m[1] == "0")
    resumed_at = lead.at(r"^rank 0: resumed from .* \(world size 2\)", joined_at)
    step = int(grown[0][3]) + 1
    lead.match(rf"^step {step} loss", after=resumed_at)
    assert pods[1].proc.poll() is None  # the survivor's pod went on throughout
    print(f"replacement joined: training again at world size 2 (step {step}) "
          f"{lead.at(rf'^step {step} loss', resumed_at) - joined_at:.1f} s after it started")


def test_an_elastic_gang_goes_on_without_a_peer_that_went_silent(
        gang: Any, tmp_path: Path) -> None:
    """A peer that stops answering without closing its sockets (a NIC down, a hung host;
    here pod 1's processes stopped with SIGSTOP) holds every collective of the others:
    gloo's default timeout is 30 minutes. The example's collective timeout (10 s here)
    fails the survivor's worker, its torchrun re-rendezvouses without the silent agent
    (no keep-alive from it), and training goes on at world size 1 from the checkpoint."""
    ckpt = tmp_path / "checkpoints"
    spec = _spec(nodes=2, steps=100_000, elastic=(1, 2))
    port = free_port()
    env = {"TRAINMASTER_RDZV_CANDIDATES": f"127.0.0.1{{index}}:{port}",
           "TM_HP_COLLECTIVE_TIMEOUT": "10"}
    pods = gang(spec, ckpt, extra_env=env, port=port)
    next(p for p in pods if p.match(r"^rank (\d) of 2: pid")[1] == "0").match(
        r"^checkpoint .*step-20 \(step 20\)")
    silent_at = time.monotonic()
    os.killpg(pods[1].proc.pid, signal.SIGSTOP)  # pod 1 hangs: no FIN, no RST
    shrunk = pods[0].match(r"^rank 0: resumed from .*step-(\d+) at step (\d+) \(world "
                           r"size 1\)", after=silent_at, seconds=180)
    again = int(shrunk[2]) + 1
    pods[0].match(rf"^step {again} loss", after=silent_at)
    took = pods[0].at(rf"^step {again} loss", silent_at) - silent_at
    print(f"a silent peer: training again at world size 1 (step {again}) {took:.1f} s later")
    assert took >= 10  # the timeout, not a closed socket, ended the wait
    os.killpg(pods[1].proc.pid, signal.SIGKILL)


def test_the_checkpoint_interval_in_minutes_is_honoured(
        world: dict[str, Path], tmp_path: Path) -> None:
    """checkpoint.intervalMinutes reaches the trainer as
    TRAINMASTER_CHECKPOINT_INTERVAL_MINUTES: it saves when that long has passed, between the
    step-count checkpoints (here: none before step 1000)."""
    ckpt = tmp_path / "checkpoints"
    env = {**os.environ, "TRAINMASTER_CHECKPOINT_INTERVAL_MINUTES": "0.001",  # 60 ms
           "TRAINMASTER_CHECKPOINT_DIR": str(ckpt), "TRAINMASTER_CHECKPOINT_KEEP": "100"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node=1",
         str(TRAIN), "--data-dir", str(world["data"]), "--train-steps", "20",
         "--checkpoint-every", "1000"],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    saved = sorted(int(p.name[5:]) for p in ckpt.iterdir()
                   if p.name.startswith("step-") and (p / "COMPLETE").exists())
    assert saved[-1] == 20  # the last step
    assert [s for s in saved if s < 20], f"no checkpoint by time before the end: {saved}"


def test_bench_recovery_torch_times_a_killed_worker_on_loopback() -> None:
    """`trainmaster bench recovery --torch`: the same kill through the command, one row."""
    proc = subprocess.run([sys.executable, "-m", "trainmaster", "bench", "recovery", "--torch",
                           "--json"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [row] = json.loads(proc.stdout)
    assert row["scenario"] == "torch-worker-kill (loopback)" and row["ok"] is True
    assert row["pods_ended"] == 0 and row["resumed_step"] >= 20
    assert 0 < row["workers_up_seconds"] <= row["checkpoint_loaded_seconds"] \
        <= row["training_again_seconds"]
    print(f"bench recovery --torch: {row}")


def _metrics(port: int) -> dict[str, float]:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(
        r"^(trainmaster_job_[a-z_]+)\{[^}]*\} ([0-9.e+-]+)$", text, re.M)}


def test_the_launcher_reports_the_torch_jobs_progress_and_a_hang_shows(
        gang: Any, tmp_path: Path) -> None:
    """The progress contract around torchrun: the pod's launcher reads the workers' `step N`
    lines and the checkpoints, and serves them as metrics (what the operator's heartbeats
    and the stalled-job alert read). A worker stopped (SIGSTOP: hung, not dead) stops the
    step and the heartbeat, and torchrun does not restart it."""
    port = free_port()
    [pod] = gang(_spec(nodes=1, steps=100_000), tmp_path / "checkpoints",
                 extra_env={"TRAINMASTER_METRICS_PORT": str(port)})
    pid = int(pod.match(r"^rank 0 of 1: pid (\d+)")[1])
    pod.match(r"^checkpoint .*step-10 \(step 10\)")
    pod.match(r"^step 13 loss")
    # The launcher reads the steps and checkpoints as they come (a loaded machine may
    # lag the log by a few seconds): both show up in the metrics.
    deadline = time.monotonic() + 60
    while ((seen := _metrics(port)).get("trainmaster_job_checkpoint_step", 0) < 10
           or seen.get("trainmaster_job_step", 0) < 12):
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
    os.kill(pid, signal.SIGSTOP)  # hung
    try:
        time.sleep(3)  # a step in flight is printed
        stopped = _metrics(port)
        time.sleep(6)
        later = _metrics(port)
        assert later["trainmaster_job_step"] == stopped["trainmaster_job_step"]
        assert later["trainmaster_job_last_heartbeat_timestamp_seconds"] == \
            stopped["trainmaster_job_last_heartbeat_timestamp_seconds"]
        assert not re.search(r"torchrun restart [1-9]", "\n".join(line for _, line in pod.lines))
    finally:
        os.kill(pid, signal.SIGCONT)
    step = int(later["trainmaster_job_step"])
    pod.match(rf"^step {step + 2} loss")  # it goes on once resumed
    deadline = time.monotonic() + 30
    while _metrics(port)["trainmaster_job_step"] <= step:
        assert time.monotonic() < deadline
        time.sleep(0.5)
