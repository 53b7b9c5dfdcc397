"""The pack as a process: `python policies/` starts, prints its gRPC port as the engine
expects, and answers the Analyzer service over gRPC (what `pulumi preview --policy-pack`
talks to). No engine needed; test_engine.py covers the full preview."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc

from policies import RULES
from tests.helpers import ROOT


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    # Started from another folder, as Pulumi does, to show the pack finds its own rules.
    process = subprocess.Popen(
        [sys.executable, "-u", str(ROOT / "policies")],
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        assert port.isdigit(), (
            f"no port: {port!r}; stderr: {process.stderr.read() if process.stderr else ''}"
        )
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)  # type: ignore[no-untyped-call]
        channel.close()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serves_every_rule(analyzer: Any) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == "trainmaster"
    assert [p.name for p in info.policies] == [r.id for r in RULES]


def test_reports_a_violation_over_grpc(analyzer: Any) -> None:
    props = struct_pb2.Struct()
    json_format.ParseDict(
        {
            "apiVersion": "trainmaster.io/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": "gpt", "namespace": "trainmaster"},
            "spec": {"image": "pytorch:latest"},
        },
        props,
    )
    request = proto.AnalyzeRequest(
        type="kubernetes:trainmaster.io/v1alpha1:TrainingJob",
        properties=props,
        urn="urn:pulumi:test::trainmaster::kubernetes:trainmaster.io/v1alpha1:TrainingJob::gpt",
        name="gpt",
    )
    response = analyzer.Analyze(request, timeout=30)
    [diagnostic] = response.diagnostics
    assert diagnostic.policyName == "image-pinned"
    assert diagnostic.enforcementLevel == proto.MANDATORY
    assert "TrainingJob trainmaster/gpt: spec.image: 'pytorch:latest' uses :latest" in (
        diagnostic.message
    )
