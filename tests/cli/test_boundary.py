"""One boundary turns every error into an exit (trainmaster.cli._app.invoke): a server
that does not answer is one line naming it (exit 1); a file or kubeconfig that cannot be
used is one line (exit 2); usage errors, including bad option values, exit 2. Through the
installed entry point, with a real refused connection (a closed loopback port)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.entry import assert_one_error_line, down_kubeconfig, run, target_line

SPEC = "stacks/dev/cluster.yaml"

# Every command that talks to a cluster through a kubeconfig, with the server down.
CLUSTER_COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["apply", SPEC],
    ["apply", SPEC, "--dry-run=server"],
    ["operator", "unfence", "gpu-0"],
    ["operator", "run", "--all-namespaces", "--spec", SPEC],
    ["node-agent", "nic", "--node", "gpu-0", "--once"],
    ["jobs", "list"],
    ["jobs", "suspend", "gpt"],
    ["jobs", "resume", "gpt", "-n", "team-a"],
]


@pytest.mark.parametrize("args", CLUSTER_COMMANDS, ids=lambda a: " ".join(a))
def test_server_down_is_one_line_naming_it(tmp_path: Path, args: list[str]) -> None:
    kubeconfig, server = down_kubeconfig(tmp_path / "kubeconfig")
    proc = run(*args, "--kubeconfig", str(kubeconfig), timeout=60)
    line = assert_one_error_line(proc, 1)
    assert f"cannot reach the Kubernetes API server {server}" in line
    # Before anything else, the command named the cluster it was going to use.
    command = " ".join(args[:2] if args[0] in ("operator", "node-agent", "jobs") else args[:1])
    assert proc.stderr.splitlines()[0] == target_line(proc) == (
        f"trainmaster {command}: context down, server {server} (kubeconfig {kubeconfig}, "
        "from --kubeconfig)")


def test_server_down_through_kubeconfig_env(tmp_path: Path) -> None:
    kubeconfig, server = down_kubeconfig(tmp_path / "kubeconfig")
    line = assert_one_error_line(run("status", env={"KUBECONFIG": str(kubeconfig)}), 1)
    assert server in line


def test_launch_with_server_down_still_runs_the_command(tmp_path: Path) -> None:
    # Reporting is best effort: training never stops because the API server is away.
    kubeconfig, _ = down_kubeconfig(tmp_path / "kubeconfig")
    proc = run("launch", "--kubeconfig", str(kubeconfig), "--", "sh", "-c", "echo ran; exit 3",
               timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "ran" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "does not exist"), ("a: [\n", "is not valid YAML at line 2"),
     ("hello", "is not a YAML mapping")],
    ids=["missing", "broken-yaml", "not-a-mapping"],
)
def test_unusable_kubeconfig_exits_2(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    line = assert_one_error_line(run("status", "--kubeconfig", str(path)), 2)
    assert needle in line and str(path) in line


def test_context_selects_and_unknown_context_exits_2(tmp_path: Path) -> None:
    kubeconfig, server = down_kubeconfig(tmp_path / "kubeconfig")
    line = assert_one_error_line(
        run("status", "--kubeconfig", str(kubeconfig), "--context", "down"), 1)
    assert server in line
    line = assert_one_error_line(
        run("status", "--kubeconfig", str(kubeconfig), "--context", "nope"), 2)
    assert "context 'nope' is not defined" in line


def test_render_output_paths(tmp_path: Path) -> None:
    existing = tmp_path / "file.yaml"
    existing.write_text("x")
    line = assert_one_error_line(run("render", SPEC, "--output-dir", str(existing)), 2)
    assert "is a file; give a folder" in line
    line = assert_one_error_line(run("render", SPEC, "-o", str(tmp_path)), 2)
    assert "is a folder; give a file" in line
    line = assert_one_error_line(run("render", SPEC, "-o", "/proc/nope/x.yaml"), 2)
    assert "/proc/nope/x.yaml: No such file or directory" in line
    line = assert_one_error_line(run("render", SPEC, "--output-dir", "/proc/nope"), 2)
    assert "/proc/nope" in line
    # -o means one file, as everywhere; the folder form writes a kustomization.
    assert run("render", SPEC, "-o", str(existing)).returncode == 0
    assert existing.read_text().startswith("apiVersion:")
    out = tmp_path / "out"
    assert run("render", SPEC, "--output-dir", str(out)).returncode == 0
    assert (out / "kustomization.yaml").is_file()


def test_tools_path_of_unknown_family_is_a_usage_error() -> None:
    line = assert_one_error_line(run("tools", "path", "nosuch"), 2)
    assert "unknown tool family nosuch; known: k8s" in line
    assert "see 'trainmaster tools path --help'" in line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "--nodes", "0", "--synthetic"], "'--nodes'"),
        (["simulate", "--nodes", "4", "--synthetic", "--jobs", "0"], "'--jobs'"),
        (["simulate", "--nodes", "4", "--synthetic", "--policy", "nosuch"], "unknown policy"),
        (["simulate", "--nodes", "4", "--synthetic", "--spec", SPEC], "exactly one of"),
        (["apply", SPEC, "--dry-run=client"], "trainmaster render"),
        (["apply", SPEC, "--dry-run=maybe"], "--dry-run must be one of none, server"),
        (["launch", "--step-patern", "x", "--", "true"], "No such option: --step-patern"),
        (["launch"], "give the command to run after --"),
        (["render", SPEC, "-o", "a.yaml", "--output-dir", "b"], "not both"),
    ],
    ids=["nodes-0", "jobs-0", "policy", "spec-and-nodes", "dry-run-client", "dry-run-value",
         "launch-typo", "launch-no-command", "render-both"],
)
def test_usage_errors_exit_2_with_the_commands_help(args: list[str], needle: str) -> None:
    line = assert_one_error_line(run(*args), 2)
    assert needle in line
    assert f"see 'trainmaster {args[0]}" in line


@pytest.mark.parametrize(
    "args",
    [["simulate", "--nodes", "4", "--trace", "/nonexistent/trace.csv"],
     ["simulate", "--nodes", "4", "--synthetic", "--queues", "/nonexistent/q.yaml"],
     ["validate", "/nonexistent/spec.yaml"],
     ["render", "/nonexistent/spec.yaml"],
     ["policy", "check", "/nonexistent/spec.yaml"]],
    ids=["trace", "queues", "validate", "render", "policy"],
)
def test_a_missing_file_exits_2_whichever_option_names_it(args: list[str]) -> None:
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "/nonexistent/" in proc.stderr and "No such file or directory" in proc.stderr


def test_launch_typo_never_runs_the_typo() -> None:
    # Before, `--step-patern` became the command: exit 127, and a gang restarting forever.
    proc = run("launch", "--step-patern", "x", "--", "true")
    assert proc.returncode == 2 and "command not found" not in proc.stderr


def test_launch_passes_options_after_the_separator_to_the_command() -> None:
    proc = run("launch", "--step-pattern", "", "--", "sh", "-c", 'echo "$@"', "sh", "--lr", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "--lr 3"


def test_cluster_status_of_a_local_cluster_whose_server_is_down(tmp_path: Path) -> None:
    # A recorded local cluster whose processes are gone (a reboot, a kill): `cluster
    # status` says each is stopped instead of calling the dead API server.
    import json
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    state = tmp_path / "home" / "clusters" / "dev"
    state.mkdir(parents=True)
    kubeconfig, _ = down_kubeconfig(state / "kubeconfig")
    (state / "cluster.json").write_text(json.dumps({
        "name": "dev", "state_dir": str(state), "kubeconfig": str(kubeconfig),
        "spec": str(Path(SPEC).resolve()), "apiserver_port": 1, "etcd_port": 2, "nodes": 8,
        "processes": [{"name": n, "pid": gone.pid, "log": str(state / f"{n}.log")}
                      for n in ("etcd", "kube-apiserver")]}))
    proc = run("cluster", "status", "--name", "dev",
               env={"TRAINMASTER_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "kube-apiserver" in proc.stdout and "stopped" in proc.stdout
