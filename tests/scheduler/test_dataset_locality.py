"""DatasetLocality: inside the domain a placement chose, nodes holding the gang's datasets
go first; it never moves a gang out of its required domain, and a gang without datasets
is placed exactly as BestFit places it."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.builders import make_gang, make_node
from trainmaster.scheduler import DEFAULT_SCORER, ClusterState, Code, CycleState
from trainmaster.scheduler._keys import DATASETS_ANNOTATION
from trainmaster.scheduler.framework.interface import LEAST_FREE_GPUS
from trainmaster.scheduler.placement.place import Placement, place_gang
from trainmaster.scheduler.plugins.best_fit import BestFit
from trainmaster.scheduler.plugins.dataset_locality import DatasetLocality
from trainmaster.scheduler.runtime.convert import pod_datasets, pod_info

WARM = {"dataset.trainmaster.io/wiki": "ready"}


def _cluster(warm: set[str]) -> ClusterState:
    nodes = [make_node(f"l{leaf}-n{n}", gpus=8, topology=("spine-0", f"leaf-{leaf}"),
                       labels=WARM if f"l{leaf}-n{n}" in warm else {})
             for leaf in range(2) for n in range(4)]
    return ClusterState(nodes, levels=("spine", "leaf"))


def _with_datasets(gang, datasets: tuple[str, ...]):  # type: ignore[no-untyped-def]
    return replace(gang, members=tuple(replace(p, datasets=datasets) for p in gang.members))


def _nodes(result: object) -> set[str]:
    assert isinstance(result, Placement), result
    return {b.node for b in result.bindings}


def test_warm_nodes_win_inside_the_domain() -> None:
    snap = _cluster({"l0-n2", "l0-n3"})
    gang = _with_datasets(make_gang("g", 2, gpus=8, level="leaf", mode="required"), ("wiki",))
    assert _nodes(place_gang(snap, gang, scorer=DEFAULT_SCORER)) == {"l0-n2", "l0-n3"}
    # BestFit alone takes the first nodes by name.
    assert _nodes(place_gang(snap, gang, scorer=BestFit())) == {"l0-n0", "l0-n1"}


def test_required_topology_is_never_overridden() -> None:
    """Warm nodes split over two leaves: a gang that must fit one leaf stays in one leaf,
    taking the warm node there and a cold one beside it."""
    snap = _cluster({"l0-n3", "l1-n3"})
    gang = _with_datasets(make_gang("g", 2, gpus=8, level="leaf", mode="required"), ("wiki",))
    placed = _nodes(place_gang(snap, gang, scorer=DEFAULT_SCORER))
    assert len({n.split("-")[0] for n in placed}) == 1
    assert len(placed & {"l0-n3", "l1-n3"}) == 1


def test_a_gang_without_datasets_is_placed_as_best_fit_places_it() -> None:
    snap = _cluster({"l0-n2", "l0-n3"})
    gang = make_gang("g", 3, gpus=8, level="leaf", mode="required")
    # DatasetLocality sits the gang out, so the default stage is BestFit alone, with
    # its index walk.
    assert DatasetLocality().pre_score(CycleState(), gang).code is Code.SKIP
    assert DEFAULT_SCORER.for_gang(gang).index == LEAST_FREE_GPUS
    assert place_gang(snap, gang, scorer=DEFAULT_SCORER) == \
        place_gang(snap, gang, scorer=BestFit())


def test_the_pod_annotation_names_the_datasets() -> None:
    assert pod_datasets({DATASETS_ANNOTATION: "wiki, books,,wiki"}) == ("books", "wiki")
    pod = {"metadata": {"name": "p", "uid": "u", "namespace": "ns",
                        "annotations": {DATASETS_ANNOTATION: "wiki"}},
           "spec": {"containers": []}, "status": {}}
    assert pod_info(pod).request.datasets == ("wiki",)


def test_gang_pods_carry_the_annotation_the_scheduler_reads() -> None:
    import yaml

    from tests.helpers import stack_doc
    from trainmaster.objects import build_gang_job
    from trainmaster.objects._jobs import DATASETS_ANNOTATION as RENDERED
    from trainmaster.spec import load_spec_text

    assert RENDERED == DATASETS_ANNOTATION
    spec = load_spec_text(yaml.safe_dump(stack_doc("dev")), "dev.yaml")
    pod = {**build_gang_job(spec, spec.job("gpt-small"), 0)["spec"]["template"], "status": {}}
    pod["metadata"] = {**pod["metadata"], "name": "p", "uid": "u"}
    assert pod_info(pod).request.datasets == ("tinystories",)


def test_only_a_ready_cache_counts() -> None:
    """warming, failed and evicted (and the old "true") are cold to the plugin."""
    from trainmaster.scheduler.plugins.dataset_locality import held
    nodes = {state: make_node(f"n-{state}", gpus=8, topology=("spine-0", "leaf-0"),
                              labels={"dataset.trainmaster.io/wiki": state})
             for state in ("ready", "warming", "failed", "evicted", "true")}
    assert {s: held(n, ("wiki",)) for s, n in nodes.items()} == {
        "ready": 1, "warming": 0, "failed": 0, "evicted": 0, "true": 0}
