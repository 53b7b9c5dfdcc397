# ruff: noqa: E501  (Helios log lines are quoted verbatim)
"""Helios and Philly job logs to the simulator's trace, on hand-written lines in their formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmaster.simulate import TraceError, convert_trace, load_trace

HELIOS = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0
1425512,uVMrF,vchbv,16,16,2,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0
1425513,uzqls,vcpDC,0,4,1,COMPLETED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-09 18:50:00,512,0
1425514,uzqls,vcpDC,3,4,2,COMPLETED,2020-06-09 18:40:00,2020-06-09 18:41:28,2020-06-09 18:50:00,512.4,88
1425515,uzqls,vcpDC,2,4,1,CANCELLED,2020-06-09 18:42:00,,,0,0
"""

PHILLY = [
    {"status": "Pass", "vc": "6214e9", "jobid": "application_1506638472019_10238",
     "submitted_time": "2017-10-03 04:58:19", "user": "ab1",
     "attempts": [{"start_time": "2017-10-03 04:58:24", "end_time": "2017-10-03 05:58:24",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]},
                              {"ip": "m2", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
    {"status": "Failed", "vc": "b436b2", "jobid": "application_1506638472019_10239",
     "submitted_time": "2017-10-03 04:50:00", "user": "cd2",
     "attempts": [{"start_time": "2017-10-03 05:00:00", "end_time": "2017-10-03 05:01:40",
                   "detail": [{"ip": "m3", "gpus": ["gpu0"]}]},
                  {"start_time": "2017-10-03 05:10:00", "end_time": "2017-10-03 05:10:20",
                   "detail": [{"ip": "m4", "gpus": ["gpu2"]}]}]},
    {"status": "Killed", "vc": "b436b2", "jobid": "application_1506638472019_10240",
     "submitted_time": "2017-10-03 05:00:00", "user": "cd2", "attempts": []},
    {"status": "Pass", "vc": "b436b2", "jobid": "application_1506638472019_10241",
     "submitted_time": "2017-10-03 05:01:00", "user": "cd2",
     "attempts": [{"start_time": "2017-10-03 05:02:00", "end_time": "2017-10-03 05:03:00",
                   "detail": [{"ip": "m5", "gpus": ["gpu0", "gpu1", "gpu2"]},
                              {"ip": "m6", "gpus": ["gpu0"]}]}]},
]


def test_helios(tmp_path: Path) -> None:
    source, target = tmp_path / "cluster_log.csv", tmp_path / "trace.csv"
    source.write_text(HELIOS)
    done = convert_trace("helios", source, target)
    assert done.written == 3
    assert dict(done.skipped) == {"no GPUs": 1, "did not run": 1}
    jobs = load_trace(target)
    # Sorted by submission; seconds after the first one (18:40:00).
    assert [(j.id, j.submit_s, j.duration_s, j.pods, j.gpus_per_pod, j.queue) for j in jobs] == [
        ("1425514", 0, 513, 3, 1, "vcpDC"),  # 3 GPUs on 2 nodes: one pod per GPU
        ("1425511", 61, 36848, 1, 1, "vcJkd"),
        ("1425512", 87, 249, 2, 8, "vchbv"),
    ]


def test_philly(tmp_path: Path) -> None:
    source, target = tmp_path / "cluster_job_log", tmp_path / "trace.csv"
    source.write_text(json.dumps(PHILLY))
    done = convert_trace("philly", source, target)
    assert done.written == 3 and dict(done.skipped) == {"did not run": 1}
    jobs = load_trace(target)
    assert [(j.id[-5:], j.submit_s, j.duration_s, j.pods, j.gpus_per_pod) for j in jobs] == [
        ("10239", 0, 120, 1, 1),  # two attempts: 100 s + 20 s of run time
        ("10238", 499, 3600, 2, 4),
        ("10241", 660, 60, 4, 1),  # uneven machines: one pod per GPU
    ]


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("helios", "job_id,gpu_num\n1,2\n", ":1: not a Helios cluster_log.csv: no column vc"),
        ("helios", HELIOS.replace("2020-06-09 18:41:27,2020", "yesterday,2020"),
         ":3: submit_time: 'yesterday' is not a time"),
        ("helios", HELIOS.replace(",16,16,2,", ",many,16,2,"), ":3: gpu_num, node_num"),
        ("philly", "{not json", ":1: not Philly's cluster_job_log JSON"),
        ("philly", '{"jobs": []}', "expected a JSON array"),
        ("philly", '[{"vc": "x"}]', "job #0: a job needs jobid"),
    ],
)
def test_errors(tmp_path: Path, kind: str, text: str, message: str) -> None:
    source = tmp_path / "in"
    source.write_text(text)
    with pytest.raises(TraceError) as err:
        convert_trace(kind, source, tmp_path / "out.csv")
    assert message in str(err.value)
