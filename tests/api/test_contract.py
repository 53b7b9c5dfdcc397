"""trainmaster.api is the wire contract: defined once, importable anywhere, and what the
writers put on objects is what the readers read."""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

import trainmaster
from tests.helpers import small_spec_doc
from trainmaster import api
from trainmaster.objects import build_gang
from trainmaster.spec import load_spec_text

ROOT = Path(trainmaster.__file__).parent
API = ROOT / "api"

KEY_LITERAL_TODO: tuple[str, ...] = ()
"""Folders of trainmaster/ exempt from the key-literal check: none."""


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that only document: a bare string statement (module,
    class, function and attribute docstrings)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def _key_literals(path: Path, root: Path = ROOT.parent) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _documentation(tree)
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and "trainmaster.io/" in node.value]


def test_no_trainmaster_io_key_literal_outside_the_api_package() -> None:
    exempt = [API, *(ROOT / folder for folder in KEY_LITERAL_TODO)]
    found = [hit for path in sorted(ROOT.rglob("*.py"))
             if not any(path.is_relative_to(folder) for folder in exempt)
             for hit in _key_literals(path)]
    assert not found, "use a name from trainmaster.api instead:\n" + "\n".join(found)


def test_the_key_literal_check_sees_code_and_f_strings_but_not_docs(tmp_path: Path) -> None:
    source = tmp_path / "trainmaster" / "sample.py"
    source.parent.mkdir()
    source.write_text('"""Labels `trainmaster.io/job`."""\n'
                      'KEY = "trainmaster.io/job"\n'
                      'def f(x: str) -> str:\n'
                      '    """Reads trainmaster.io/x."""\n'
                      '    return f"trainmaster.io/{x}"\n')
    hits = [h.split(": ", 1)[0] for h in _key_literals(source, tmp_path)]
    assert hits == ["trainmaster/sample.py:2", "trainmaster/sample.py:5"]


def test_the_api_package_imports_only_the_standard_library() -> None:
    for path in API.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                assert name.startswith("trainmaster.api") or top in sys.stdlib_module_names, \
                    f"{path.name} imports {name}"


def test_importing_the_api_loads_nothing_else_of_trainmaster_nor_pydantic() -> None:
    code = ("import sys, trainmaster.api; print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith(('trainmaster', 'pydantic', 'yaml')))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded and all(m == "trainmaster" or m.startswith("trainmaster.api")
                          for m in loaded), loaded


def test_the_api_package_parses_as_python_3_8() -> None:
    """The launcher bundle carries trainmaster.api into training images (Python >= 3.8)."""
    for path in API.glob("*.py"):
        ast.parse(path.read_text(), feature_version=(3, 8))


def test_the_spec_api_version_type_names_the_api_version() -> None:
    assert api.SpecApiVersion.__args__ == (api.API_VERSION,)  # type: ignore[attr-defined]
    assert f"{api.GROUP}/{api.VERSION}" == api.API_VERSION
    assert f"{api.PODGROUP_GROUP}/{api.PODGROUP_VERSION}" == api.PODGROUP_API_VERSION


# --- the keys no test guarded before: written by one component, read by another -------

def _gang(queue: str) -> list[dict[str, object]]:
    doc = small_spec_doc("wire", jobs=[{"name": "gpt", "image": "img:1", "launcher": "torchrun",
                                        "nodes": 2, "queue": queue}])
    doc["scheduler"] = {"queues": [{"name": name} for name in dict.fromkeys(["default", queue])]}
    spec = load_spec_text(yaml.safe_dump(doc))
    return build_gang(spec, spec.jobs[0], attempt=0)


def test_the_queue_label_is_written_on_the_gang_and_read_by_the_scheduler() -> None:
    from trainmaster.scheduler.runtime.convert import pod_group_info, pod_info

    objects = {o["kind"]: o for o in _gang("team-a")}
    group, job = objects["PodGroup"], objects["Job"]
    assert api.QUEUE_LABEL == "kueue.x-k8s.io/queue-name"
    assert group["metadata"]["labels"][api.QUEUE_LABEL] == "team-a"
    group["metadata"].setdefault("namespace", "ns")
    assert pod_group_info(group).queue == "team-a"
    template = job["spec"]["template"]
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", **template["metadata"]},
           "spec": template["spec"], "status": {}}
    assert pod_info(pod).queue == "team-a"


def test_the_checkpoint_annotation_as_the_operator_writes_it_is_read_by_the_scheduler() -> None:
    from trainmaster.scheduler.runtime.convert import pod_group_info

    when = datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=UTC)
    assert api.CHECKPOINT_ANNOTATION == "trainmaster.io/last-checkpoint-time"
    group = next(o for o in _gang("default") if o["kind"] == "PodGroup")
    group["metadata"]["namespace"] = "ns"
    assert pod_group_info(group).last_checkpoint == 0.0
    # What trainmaster.operator._gang writes when the job reports a checkpoint:
    group["metadata"]["annotations"][api.CHECKPOINT_ANNOTATION] = api.format_time(when)
    assert pod_group_info(group).last_checkpoint == when.timestamp()


# --- one quantity parser, one time parser --------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("8", Decimal(8)), ("500m", Decimal("0.5")), ("2Gi", Decimal(2**31)), ("1e3", Decimal(1000)),
    ("1.5k", Decimal(1500)), ("100n", Decimal("1e-7")), (4, Decimal(4)), (" 1Ti ", Decimal(2**40)),
])
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert api.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "1Qi", "", "1..2"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"quantity|suffix"):
        api.parse_quantity(text)


def test_parse_bytes_takes_the_spec_sizes_only() -> None:
    assert api.parse_bytes("1.5Ti") == 3 * 2**39
    assert api.parse_bytes("64") == 64
    assert api.format_bytes(api.parse_bytes("2Ti")) == "2Ti"
    for text in ("500m", "1e3", "-1Gi"):
        with pytest.raises(ValueError, match="is not a quantity like 512Gi"):
            api.parse_bytes(text)


def test_parse_time_reads_what_format_time_writes() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert api.parse_time(api.format_time(when)) == when
    assert api.parse_time("2026-01-02T03:04:05Z") == when.replace(microsecond=0)
    assert api.parse_time("2026-01-02T03:04:05") == when.replace(microsecond=0)  # no zone: UTC
    assert api.format_seconds(when) == "2026-01-02T03:04:05Z"
    for absent in (None, "", 7, "yesterday"):
        assert api.parse_time(absent) is None
        assert api.epoch_seconds(absent) == 0.0
    assert api.epoch_seconds("1970-01-01T00:01:00Z") == 60.0


# --- every label, annotation, taint, Event reason and condition spelled once ------------

_WIRE_NAMES = frozenset({
    "POD_SCHEDULED", "UNSCHEDULABLE", "DISRUPTION_TARGET", "PREEMPTION_BY_SCHEDULER",
    "NAMESPACE_NOT_SERVED", "LOCAL_QUEUE_NOT_FOUND", "CLUSTER_QUEUE_NOT_FOUND",
    "NIC_CONDITION", "GPU_CONDITION", "WARMUP_FAILED", "WARMUP_TIMEOUT", "NON_RETRYABLE",
    "MAX_RESTARTS", "INVALID_SPEC", "PREEMPT_LOWER"})
"""Condition types and reasons not named by their prefix below."""


def _wire_values() -> dict[str, str]:
    """value -> name of each label, annotation, taint, environment variable, Event reason
    and condition of trainmaster.api distinctive enough to find (a key with a dot or slash, or a
    CamelCase reason of two or more words: "Running" is also a phase and a word)."""
    import re

    import trainmaster.api as api

    out = {}
    for name in api.__all__:
        value = getattr(api, name)
        if not (isinstance(value, str) and name.isupper()):
            continue
        if not (name.endswith(("_LABEL", "_ANNOTATION", "_TAINT", "_ENV"))
                or name.startswith(("EVENT_", "REASON_", "COND_")) or name in _WIRE_NAMES):
            continue
        if "/" in value or "." in value or re.search(r"[a-z][A-Z]", value) \
                or name.endswith("_ENV"):
            out[value] = name
    return out


def test_no_wire_string_is_spelled_outside_trainmaster_api() -> None:
    wire = _wire_values()
    assert {"ElasticShrink", "NamespaceNotServed", "scheduling.x-k8s.io/pod-group",
            "PodScheduled", "FailedScheduling", "trainmaster.io/preemption",
            "TRAINMASTER_RESUME_FROM", "KUBERNETES_SERVICE_HOST"} <= set(wire)
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent.name == "api":
            continue
        tree = ast.parse(path.read_text())
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs and node.value in wire:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r} "
                             f"(use trainmaster.api.{wire[node.value]})")
    assert not found, "\n".join(found)
