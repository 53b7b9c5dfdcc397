"""Every metric that an alert rule or a dashboard panel reads has a source the stack deploys:
either trainmaster exports it (a prometheus-client definition in trainmaster/), or it is
listed below as coming from a named exporter, and the rendered stack deploys that exporter.

The definitions are found by reading the source (ast), so a metric renamed in code but not
in the rules, or a rule about a metric nothing defines, fails here.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, stack_doc
from trainmaster.objects import build_monitoring
from trainmaster.spec import ClusterSpec, validate_data

PACKAGE = ROOT / "trainmaster"
METRIC_KINDS = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"}
SUFFIXES = {
    "Counter": ("_total", "_created"),
    "Histogram": ("_bucket", "_sum", "_count", "_created"),
    "Summary": ("_sum", "_count", "_created"),
    "Info": ("_info",),
    "Gauge": (),
    "Enum": (),
}

EXTERNAL: dict[str, tuple[str, ...]] = {
    # NVIDIA's DCGM exporter: the spec's monitoring.gpuExporter DaemonSet.
    "dcgm-exporter": (
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
    ),
}
"""Metrics of exporters that are not trainmaster, by the image name that deploys them."""

# --- what trainmaster defines -----------------------------------------------------------


def _strings_of(node: ast.AST, env: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                part = _strings_of(value.value, env)
            else:
                part = _strings_of(value, env)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    return None


def _assignments(tree: ast.AST) -> dict[str, str]:
    """name -> string for `x = "..."` and `x, y = "...", ...` anywhere in a module."""
    env: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs: list[tuple[ast.AST, ast.AST]] = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=False))
            for name, value in pairs:
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str):
                    env[name.id] = value.value
    return env


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def defined_metrics(package: Path = PACKAGE) -> dict[str, str]:
    """Metric family name -> kind, for every prometheus-client metric in the package.

    A definition whose name is a parameter of a small wrapper (``def gauge(name, doc):
    return Gauge(name, ...)``) takes its names from the wrapper's calls in that module."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        env = _assignments(tree)
        wrappers: dict[str, str] = {}  # wrapper function -> metric kind
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            params = [a.arg for a in func.args.args]
            for call in ast.walk(func):
                if isinstance(call, ast.Call) and _callee(call) in METRIC_KINDS and call.args:
                    first = call.args[0]
                    if isinstance(first, ast.Name) and first.id in params \
                            and first.id not in env:
                        wrappers[func.name] = str(_callee(call))
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call) or not call.args:
                continue
            kind = _callee(call)
            if kind in wrappers:
                kind = wrappers[kind]
            elif kind not in METRIC_KINDS:
                continue
            name = _strings_of(call.args[0], env)
            if name is not None and re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name):
                found[name] = str(kind)
    return found


def exported_series(defined: dict[str, str]) -> set[str]:
    """Every series name the definitions expose (a Counter `x` is scraped as `x_total`)."""
    names: set[str] = set()
    for name, kind in defined.items():
        base = name.removesuffix("_total") if kind == "Counter" else name
        names.add(base)
        names.update(base + suffix for suffix in SUFFIXES[kind])
    return names


# --- what the rules and dashboards read ---------------------------------------------------

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
             "group_right", "bool", "offset", "inf", "nan"}


def promql_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names (in `{...}`, `by (...)`, `on (...)`) or durations."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if word.lower() in _KEYWORDS or rest.startswith("("):
            continue
        names.add(word)
    return names


def used_metrics(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Metric -> where it is used, over the PrometheusRule and the dashboard ConfigMaps."""
    used: dict[str, str] = {}
    for obj in objects:
        if obj["kind"] == "PrometheusRule":
            for group in obj["spec"]["groups"]:
                for rule in group["rules"]:
                    for name in promql_metrics(rule["expr"]):
                        used[name] = f"alert {rule.get('alert') or rule.get('record')}"
        if obj["kind"] == "ConfigMap" and obj["metadata"].get("labels", {}).get(
                "grafana_dashboard"):
            for text in obj["data"].values():
                for panel in json.loads(text)["panels"]:
                    for target in panel["targets"]:
                        for name in promql_metrics(target["expr"]):
                            used[name] = f"panel {panel['title']!r}"
    return used


def deployed_images(objects: list[dict[str, Any]]) -> list[str]:
    images = []
    for obj in objects:
        template = obj.get("spec", {}).get("template", {}).get("spec", {})
        images += [c["image"] for c in template.get("containers", [])]
    return images


def _spec(gpu_exporter: bool) -> ClusterSpec:
    doc = stack_doc("dev")
    doc.setdefault("monitoring", {})["gpuExporter"] = {"enabled": gpu_exporter}
    return validate_data(doc, "test")


# --- tests ---------------------------------------------------------------------------------


def test_promql_metrics_skips_functions_labels_and_keywords() -> None:
    expr = ('max by (node) (foo_ready{condition="Ready",x="a b"}) == 0 and on (node) '
            'increase(bar_total[1h]) > 0 or vector(0) - time()')
    assert promql_metrics(expr) == {"foo_ready", "bar_total"}


def test_the_source_scan_finds_what_the_registries_hold() -> None:
    """The ast scan agrees with the live registries of the scheduler and the operator."""
    from trainmaster.operator._metrics import OperatorMetrics
    from trainmaster.scheduler.runtime.metrics import SchedulerMetrics

    defined = defined_metrics()
    for registry in (SchedulerMetrics().registry, OperatorMetrics().registry):
        for family in registry.collect():
            assert family.name in defined or family.name + "_total" in defined, family.name
    assert defined["trainmaster_scheduler_gpu_fragmentation_ratio"] == "Gauge"
    assert defined["trainmaster_operator_node_ready"] == "Gauge"


@pytest.mark.parametrize("gpu_exporter", [True, False])
def test_every_metric_used_has_a_deployed_source(gpu_exporter: bool) -> None:
    objects = build_monitoring(_spec(gpu_exporter))
    used = used_metrics(objects)
    assert used, "the rules and dashboards read no metric at all"
    ours = exported_series(defined_metrics())
    images = deployed_images(objects)
    unsourced = []
    for name, where in sorted(used.items()):
        if name in ours:
            continue
        exporter = next((e for e, names in EXTERNAL.items() if name in names), None)
        if exporter is None:
            unsourced.append(f"{name} ({where}): exported by nothing")
        elif not any(exporter in image for image in images):
            unsourced.append(f"{name} ({where}): {exporter} is not deployed")
    assert not unsourced, "\n".join(unsourced)


def test_the_launcher_progress_metrics_the_rules_read_are_defined() -> None:
    """The two metrics issue #12 found dangling are now defined by trainmaster."""
    used = used_metrics(build_monitoring(_spec(True)))
    ours = exported_series(defined_metrics())
    for name in ("trainmaster_job_last_heartbeat_timestamp_seconds",
                 "trainmaster_job_checkpoint_step", "trainmaster_operator_node_ready"):
        assert name in used
        assert name in ours, f"{name} is used by {used[name]} but nothing defines it"
