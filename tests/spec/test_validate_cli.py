"""`trainmaster validate`: exit codes, messages on stderr, --json, and no traceback ever."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import STACKS, stack_doc, write_spec
from trainmaster.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmaster", *args], capture_output=True, text=True, timeout=60
    )


def test_valid_stacks_exit_0() -> None:
    files = [str(STACKS / s / "cluster.yaml") for s in ("dev", "bench", "prod-example")]
    proc = run_cli("validate", *files)
    assert proc.returncode == 0, proc.stderr
    assert "stacks/bench/cluster.yaml: valid (500 nodes, 4000 GPUs, 0 jobs)" in proc.stdout


def test_invalid_exits_1_with_path_on_stderr(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][1]["gpusPerPod"] = 16
    proc = run_cli("validate", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1
    assert "jobs[1].gpusPerPod: 16 is more than the 8 GPUs per node" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"metadata: [\n", "bad.yaml:2:1: not valid YAML"),
        (b"\xff\xfe\x00binary", "not UTF-8"),
        (b"a: 1\na: 2\n", "duplicate key 'a'"),
        (b"[" * 5000, "nesting depth"),
        (b"a: " + b"[" * 100 + b"]" * 100, "nested deeper than 64"),
    ],
    ids=["broken-yaml", "binary", "duplicate-key", "very-deep-nesting", "deep-nesting"],
)
def test_unparseable_exits_2(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    proc = run_cli("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file_exits_2() -> None:
    proc = run_cli("validate", "/nonexistent/spec.yaml")
    assert proc.returncode == 2
    assert "cannot read the file" in proc.stderr


@pytest.mark.parametrize(
    "content", ["", "- a\n- b\n", "42\n", "{}\n"], ids=["empty", "list", "scalar", "empty-mapping"]
)
def test_not_a_spec_exits_1(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(content)
    proc = run_cli("validate", str(path))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_json_output(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["queue"] = "nope"
    proc = run_cli("validate", "--json", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1
    (result,) = json.loads(proc.stdout)
    assert result["valid"] is False
    assert result["errors"][0]["path"] == "jobs[0].queue"
    assert isinstance(result["errors"][0]["line"], int)


def test_json_spec_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(stack_doc()))
    assert run_cli("validate", str(path)).returncode == 0


# --- property: mutations of the examples never produce a traceback or an odd exit code ---

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "-1", "0", "8", "10.0.0.0/8", "999.1.1.1/99", "roce", "1Ti", "leaf"]),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated_docs(draw: st.DrawFn) -> Any:
    doc = stack_doc(draw(st.sampled_from(["dev", "prod-example"])))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(_values)
        else:
            parent[path[-1]] = draw(_values)
    return doc


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=mutated_docs())
def test_mutated_examples_exit_0_or_1(
    tmp_path_factory: pytest.TempPathFactory, doc: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    code = main(["validate", str(path)])  # an exception here fails the test: no traceback
    assert code in (0, 1)
    if code == 1:
        assert capsys.readouterr().err.strip()


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=200))
def test_random_bytes_exit_1_or_2(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "spec.yaml"
    path.write_bytes(raw)
    assert main(["validate", str(path)]) in (1, 2)


@pytest.mark.parametrize("source", ["gs://corpus/c4", "az://corpus/c4", "ftp://host/c4",
                                    "hdfs://nn/c4"])
def test_an_unsupported_dataset_scheme_exits_1_naming_the_field(tmp_path: Path,
                                                               source: str) -> None:
    doc = stack_doc()
    doc["cache"]["datasets"][0]["source"] = source
    proc = run_cli("validate", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1
    scheme = source.split(":")[0]
    assert (f"cache.datasets[0].source: the {scheme}:// scheme is not supported; use one of "
            "file://, http://, https://, s3://") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_s3_settings_on_another_scheme_are_refused(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["cache"]["datasets"][0].update(source="https://example.org/c4.tar",
                                       credentialsSecret="c4-s3")
    proc = run_cli("validate", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1
    assert "cache.datasets[0].credentialsSecret: only an s3:// source uses it" in proc.stderr
