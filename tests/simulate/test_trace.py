"""The trace CSV parser: what it accepts, and errors that name the line and the column."""

from __future__ import annotations

import pytest

from trainmaster.scheduler import TopologyConstraint, TopologyMode
from trainmaster.simulate import TraceError, parse_trace

HEADER = "id,submit_s,duration_s,pods,gpus_per_pod"


def test_optional_columns_and_sorting() -> None:
    jobs = parse_trace([
        f"{HEADER},queue,priority,topology",
        "late,50,10,2,8,research,5,required:leaf",
        "early,0.5,3.5,1,1,,,",
        "mid,10,1,4,8,prod,-1,preferred:spine",
    ])
    assert [j.id for j in jobs] == ["early", "mid", "late"]
    late = jobs[2]
    assert (late.queue, late.priority, late.gpus, late.line) == ("research", 5, 16, 2)
    assert late.topology == TopologyConstraint("leaf", TopologyMode.REQUIRED)
    assert jobs[0].topology is None and jobs[0].queue == "default"
    assert jobs[1].topology == TopologyConstraint("spine", TopologyMode.PREFERRED)


def test_a_prefix_of_the_optional_columns() -> None:
    jobs = parse_trace([f"{HEADER},queue", "x,0,1,1,1,q"])
    assert jobs[0].queue == "q"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty file"),
        (["id,submit,duration_s,pods,gpus_per_pod"], ":1: header"),
        ([f"{HEADER},priority"], ":1: header"),
        ([HEADER], "no jobs"),
        ([HEADER, "a,0,10,1"], ":2: 4 columns, the header has 5"),
        ([HEADER, "a,0,10,1,8", "a,1,10,1,8"], ":3: column 'id': id 'a' already used on line 2"),
        ([HEADER, ",0,10,1,8"], ":2: column 'id': id is empty"),
        ([HEADER, "a,soon,10,1,8"], ":2: column 'submit_s': submit_s must be a number"),
        ([HEADER, "a,-1,10,1,8"], ":2: column 'submit_s': submit_s must be >= 0"),
        ([HEADER, "a,0,0,1,8"], ":2: column 'duration_s': duration_s must be > 0"),
        ([HEADER, "a,0,inf,1,8"], "column 'duration_s'"),
        ([HEADER, "a,0,10,1.5,8"], ":2: column 'pods': pods must be an integer"),
        ([HEADER, "a,0,10,1,0"], ":2: column 'gpus_per_pod': gpus_per_pod must be >= 1"),
        ([f"{HEADER},queue,priority", "a,0,10,1,8,q,high"], ":2: column 'priority'"),
        ([f"{HEADER},queue,priority,topology", "a,0,10,1,8,q,0,leaf"],
         ":2: column 'topology': 'leaf' is not <mode>:<level>"),
        ([f"{HEADER},queue,priority,topology", "a,0,10,1,8,q,0,strict:leaf"],
         "column 'topology'"),
    ],
)
def test_errors_name_line_and_column(lines: list[str], message: str) -> None:
    with pytest.raises(TraceError) as err:
        parse_trace(lines, "t.csv")
    assert message in str(err.value)
    assert str(err.value).startswith("t.csv")
