"""Joint placement of a burst of gangs keeps them whole where queue order would split."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from tests.scheduler.apifake import (
    Cluster,
    fake_runtime,
    group_obj,
    node_obj,
    pod_obj,
    run_once,
    settle,
)
from tests.scheduler.builders import make_cluster, make_gang
from trainmaster.scheduler import GangScheduler, SchedulerConfig
from trainmaster.scheduler.placement.plan import plan_batch, plannable

SIZES = {"g0": 6, "g1": 5, "g2": 4, "g3": 4, "g4": 3, "g5": 2}
"""24 pods of 4 GPUs on 2 leaves of 6 nodes x 8 GPUs (12 pods each): only 6+4+2 | 5+4+3
keeps every gang whole; best fit in queue order puts 6+5 together and strands g5."""


def gangs() -> list:  # type: ignore[type-arg]
    return [make_gang(name, size, gpus=4, level="leaf") for name, size in SIZES.items()]


def test_queue_order_alone_splits_a_gang() -> None:
    sched = GangScheduler(make_cluster(spines=1, leaves=2, per_leaf=6))
    for gang in gangs():
        sched.submit(gang)
    result = sched.run_cycle()
    split = [p.gang for p in result.placed if p.level != "leaf" and p.level != "node"]
    assert split == ["default/g5"]


def test_the_plan_fits_every_gang_whole() -> None:
    snap = make_cluster(spines=1, leaves=2, per_leaf=6)
    batch = gangs()
    assert all(plannable(g, "leaf") for g in batch)
    plan = plan_batch(snap, batch, "leaf")
    assert plan.exact and not plan.left_out
    per_leaf: dict[str, int] = defaultdict(int)
    for gang in batch:
        per_leaf[plan.assigned[gang.key]] += len(gang.members)
    assert sorted(per_leaf.values()) == [12, 12]


def test_when_not_all_fit_whole_the_fewest_are_left_out() -> None:
    snap = make_cluster(spines=1, leaves=2, per_leaf=6)
    batch = [make_gang(f"g{i}", size, gpus=4, level="leaf")
             for i, size in enumerate([7, 7, 7, 3])]  # 24 pods; two 7s cannot share a leaf
    plan = plan_batch(snap, batch, "leaf")
    assert not plan.exact and len(plan.left_out) == 1


def test_runtime_plans_a_burst_and_binds_every_gang_in_one_leaf() -> None:
    nodes = [node_obj(f"{leaf}-{i}", leaf=leaf) for leaf in ("leaf-a", "leaf-b")
             for i in range(6)]
    pods, groups = [], []
    for name, size in SIZES.items():
        groups.append(group_obj(name, size, domain="leaf", mode="preferred"))
        pods += [pod_obj(f"{name}-{i}", group=name, gpus=4) for i in range(size)]
    cluster = Cluster(nodes, pods, groups)
    _, rt = fake_runtime(cluster, SchedulerConfig())

    async def run() -> None:
        await rt.start()
        result = await rt.step()
        assert result is not None and len(result.placed) == len(SIZES)
        await rt.idle()
        await rt.shutdown()

    asyncio.run(run())
    assert len(cluster.binds) == 24
    for name in SIZES:
        leaves = {node.rsplit("-", 1)[0] for pod, node in cluster.binds.items()
                  if pod.startswith(f"{name}-")}
        assert len(leaves) == 1, (name, leaves)


LIVE_SIZES = {"g0": 6, "g1": 6, "g2": 4, "g3": 4, "g4": 2, "g5": 2}
"""test_live's gangs: they fill both leaves exactly (6+6 | 4+4+2+2)."""


def test_restart_with_a_gang_cut_mid_bind_finishes_it_before_planning_the_rest() -> None:
    """The state a scheduler killed mid-run leaves (test_live's kill-and-restart case):
    g0 bound whole and g1 bound 2 of 6 in leaf-a, so leaf-a has room for exactly g1's
    other 4 pods. A joint plan of the fresh gangs (g2..g5) alone would put g2 there (the
    tightest fit) and g1 could never finish: the restarted scheduler must not plan then."""
    nodes = [node_obj(f"{leaf}-{i}", leaf=leaf) for leaf in ("leaf-a", "leaf-b")
             for i in range(6)]
    pods, groups = [], []
    for name, size in LIVE_SIZES.items():
        groups.append(group_obj(name, size, domain="leaf", mode="required"))
    bound = {**{f"g0-{i}": f"leaf-a-{i // 2}" for i in range(6)},
             "g1-0": "leaf-a-3", "g1-1": "leaf-a-3"}
    for name, size in LIVE_SIZES.items():
        pods += [pod_obj(f"{name}-{i}", group=name, gpus=4, node=bound.get(f"{name}-{i}"))
                 for i in range(size)]
    cluster = Cluster(nodes, pods, groups)
    run_once(cluster, SchedulerConfig())
    assert len(cluster.binds) == 24 - len(bound)
    placed = {**bound, **cluster.binds}
    for name in LIVE_SIZES:
        leaves = {node.rsplit("-", 1)[0] for pod, node in placed.items()
                  if pod.startswith(f"{name}-")}
        assert len(leaves) == 1, (name, leaves)
    assert {placed[f"g1-{i}"].rsplit("-", 1)[0] for i in range(6)} == {"leaf-a"}


def test_a_burst_that_cannot_be_planned_is_still_bound_in_chunks_of_queue_order() -> None:
    """What a new leader finds (the old leader's last gang partly bound in its watch):
    no joint plan, but the first binds must not wait for a cycle over every gang. The
    first chunk's binds are on the wire before the later chunks are placed, and every
    gang, the partly bound one included, ends whole in one leaf as one cycle would."""
    nodes = [node_obj(f"{leaf}-{i}", leaf=leaf) for leaf in ("leaf-a", "leaf-b")
             for i in range(16)]
    sizes = {"p": 2, **{f"f{i:02d}": 2 for i in range(28)}}
    groups = [group_obj(name, size, domain="leaf", mode="required")
              for name, size in sizes.items()]
    pods = [pod_obj(f"{name}-{i}", group=name, gpus=4,
                    node="leaf-a-0" if (name, i) == ("p", 0) else None)
            for name, size in sizes.items() for i in range(size)]
    cluster = Cluster(nodes, pods, groups)
    cycles_at_bind: list[int] = []

    def handler(method: str, path: str, body: object) -> dict[str, object]:
        if path.endswith("/binding"):
            cycles_at_bind.append(rt.cycles)
        return cluster(method, path, body)

    _, rt = fake_runtime(handler, SchedulerConfig())
    settle(rt)
    assert len(cluster.binds) == 57
    # 4 chunks of 8 gangs and a last cycle: the first binds reach the API server (a few
    # loop turns after their chunk) while later chunks are still to be placed.
    assert rt.cycles == 5 and cycles_at_bind[0] < 4
    placed = {"p-0": "leaf-a-0", **cluster.binds}
    for name in sizes:
        leaves = {node.rsplit("-", 1)[0] for pod, node in placed.items()
                  if pod.startswith(f"{name}-")}
        assert len(leaves) == 1, (name, leaves)
