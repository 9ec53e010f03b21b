"""Map tasks and dynamic workflows in the engine: children created at run time, each an
ordinary node (attempts, cache, quotas), the parent's bound and success ratio, the outputs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sluice.executions.launch import request_abort
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.records import NodeRecord
from support.engine import fast_settings, outcome, run

COMPOUND_FLOWS = Path(__file__).parent / "compound_flows.py"


@pytest.fixture
def cf() -> ModuleType:
    return load_module("compound_flows", str(COMPOUND_FLOWS))


@pytest.fixture
async def wide(sqlite_url: str) -> Runtime:
    rt = await Runtime.open(fast_settings(sqlite_url, workers=4))
    yield rt  # type: ignore[misc]
    await rt.close()


def runs(directory: Path, name: str) -> int:
    path = directory / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def max_overlap(nodes: Iterable[NodeRecord]) -> int:
    """The most children active at once, from their stored start and end times."""
    edges = []
    for n in nodes:
        assert n.started_at is not None and n.ended_at is not None, n.node_id
        edges += [(n.started_at, 1), (n.ended_at, -1)]
    active = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        active += step
        peak = max(peak, active)
    return peak


def children(nodes: dict[str, NodeRecord], parent: str) -> list[NodeRecord]:
    return [n for k, n in nodes.items() if k.startswith(parent + "[")]


async def test_map_runs_each_item_once_under_its_bound(
    wide: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    xs = list(range(8))
    result = await run(wide, cf.mapped, xs=xs, directory=str(tmp_path), delay=0.2)
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": [x * x for x in xs]}
    items = children(result.nodes, "map_work")
    assert sorted(n.node_id for n in items) == sorted(f"map_work[{i}]" for i in xs)
    assert all(runs(tmp_path, f"item{x}") == 1 for x in xs)
    assert max_overlap(items) == 3, "at most 3 items at once, and the bound was reached"


async def test_map_output_feeds_a_downstream_task(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.mapped_then_total, xs=[1, 2, 3], directory=str(tmp_path))
    assert result.record.outputs == {"o0": 14}
    assert result.nodes["total"].inputs == {"values": [1, 4, 9]}


async def test_map_of_an_empty_list_succeeds_with_an_empty_list(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.mapped, xs=[], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert result.record.outputs == {"o0": []}
    assert list(result.nodes) == ["map_work"]


async def test_a_failed_item_fails_the_map_and_the_execution_at_ratio_one(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.mapped, xs=[1, -2, 3, 4, 5, 6], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.FAILED
    error = result.record.error or {}
    assert error["node"] == "map_work" and "1 of 6 items failed" in error["message"]
    assert result.nodes["map_work[1]"].phase is NodePhase.FAILED
    assert not any(n.phase is NodePhase.RUNNING for n in result.nodes.values())


async def test_below_ratio_one_failed_items_are_none(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.tolerant_raw, xs=[1, -2, 3, -4], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": [1, None, 9, None]}
    downstream = await run(runtime, cf.tolerant, xs=[1, -2, 3, 4], directory=str(tmp_path))
    assert downstream.record.outputs == {"o0": 3}


async def test_too_many_failures_fail_the_map_below_ratio_one(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.tolerant, xs=[-1, -2, -3, 4], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.FAILED
    assert "of 4 items failed; 2 must succeed" in (result.record.error or {})["message"]
    assert result.nodes["count_present"].phase is NodePhase.SKIPPED


async def test_a_cached_item_is_not_run_again(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    first = await run(runtime, cf.cached_map, xs=[1, 2], directory=str(tmp_path))
    second = await run(runtime, cf.cached_map, xs=[1, 2, 3], directory=str(tmp_path))
    assert second.record.outputs == {"o0": [101, 102, 103]}
    assert first.record.outputs == {"o0": [101, 102]}
    statuses = [second.nodes[f"map_cached_work[{i}]"].cache_status.value for i in range(3)]
    assert statuses == ["HIT", "HIT", "POPULATED"]
    assert [runs(tmp_path, f"cached{x}") for x in (1, 2, 3)] == [1, 1, 1]


async def test_dynamic_builds_and_runs_its_workflow(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.dynamic_fan, n=3, directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": 0 + 1 + 4}
    assert set(result.nodes) == {
        "fan",
        "fan:build",
        "fan.work",
        "fan.work-2",
        "fan.work-3",
        "fan.total",
    }
    assert result.nodes["fan.total"].inputs == {"values": [0, 1, 4]}
    assert runs(tmp_path, "build") == 1


async def test_a_failed_node_of_a_dynamic_workflow_fails_the_execution(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.dynamic_map, xs=[0, -3], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.FAILED
    assert (result.record.error or {})["node"] == "nested"
    assert "negative item -2" in (result.record.error or {})["message"]
    assert result.nodes["total"].phase is NodePhase.SKIPPED


async def test_a_map_inside_a_dynamic_workflow(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, cf.dynamic_map, xs=[1, 2, 3], directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": 4 + 9 + 16}
    assert {"nested.map_work[0]", "nested.map_work[2]"} <= set(result.nodes)


async def test_children_are_shown_after_their_parent(
    runtime: Runtime, cf: ModuleType, tmp_path: Path
) -> None:
    from sluice.service.facade import Sluice

    result = await run(runtime, cf.dynamic_map, xs=[5], directory=str(tmp_path))
    service = Sluice(runtime)
    shown = await service.execution(result.record.id)
    rows = [(n.node, n.parent, n.task.rpartition(".")[2]) for n in shown.nodes]
    assert rows == [
        ("nested", None, "nested"),
        ("nested:build", "nested", "nested"),
        ("nested.map_work", "nested", "map_work"),
        ("nested.map_work[0]", "nested.map_work", "work"),
        ("total", None, "total"),
    ]
    depends = {n.node: n.depends_on for n in shown.nodes}
    assert depends["nested.map_work[0]"] == ["nested.map_work"]
    assert depends["nested.map_work"] == ["nested:build"] and depends["total"] == ["nested"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_abort_stops_the_items_and_the_dynamic_children(
    backend: str, request: pytest.FixtureRequest, cf: ModuleType, tmp_path: Path
) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    rt = await Runtime.open(fast_settings(url, workers=6), upgrade=True)  # 3 + 2 + the build
    try:
        mapped = await rt.launch(
            cf.mapped, {"xs": list(range(6)), "directory": str(tmp_path), "delay": 30.0}
        )
        dynamic = await rt.launch(
            cf.dynamic_fan, {"n": 2, "directory": str(tmp_path), "delay": 30.0}
        )
        engine = await rt.engine(only=[mapped.id, dynamic.id])
        await engine.start()
        await _until(rt, mapped.id, lambda o: "map_work[2]" in o.nodes)
        await _until(rt, dynamic.id, lambda o: "fan.work" in o.nodes)
        for record in (mapped, dynamic):
            await request_abort(rt.store, rt.notifier, rt.clock, record.id, "test abort")
            await asyncio.wait_for(engine.wait(record.id), 30)
        await engine.stop()
        results = [await outcome(rt, r.id) for r in (mapped, dynamic)]
    finally:
        await rt.close()
    for result in results:
        assert result.record.phase is ExecutionPhase.ABORTED
        assert all(n.phase.is_terminal for n in result.nodes.values())
    assert results[0].nodes["map_work"].phase is NodePhase.ABORTED
    assert {results[0].nodes[f"map_work[{i}]"].phase for i in range(3)} == {NodePhase.ABORTED}
    assert "map_work[3]" not in results[0].nodes, "no item started after the abort"
    assert results[1].nodes["fan.work"].phase is NodePhase.ABORTED


async def _until(rt: Runtime, execution_id: str, condition: Any, limit: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not condition(await outcome(rt, execution_id)):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_launch_plan_nodes_start_child_executions_under_its_policy(
    sqlite_url: str, cf: ModuleType, tmp_path: Path
) -> None:
    from sluice.api import run_async
    from sluice.spec.compound import child_execution_id

    settings = fast_settings(sqlite_url, workers=4)
    final = await run_async(cf.calls_launch_plans, {"directory": str(tmp_path)}, settings)
    assert final.phase is ExecutionPhase.SUCCEEDED, final.error
    assert final.outputs == {"o0": 10 + 20}
    rt = await Runtime.open(settings)
    try:
        parent = await outcome(rt, final.id)
        kids = [
            await outcome(rt, child_execution_id(final.id, node))
            for node in ("one_at_a_time", "one_at_a_time-2")
        ]
    finally:
        await rt.close()
    assert parent.nodes["one_at_a_time"].outputs == {"o0": 10}
    for kid in kids:
        assert kid.record.launch_plan == "compound_flows.one_at_a_time"
        assert kid.record.phase is ExecutionPhase.SUCCEEDED
    first, second = sorted(kids, key=lambda k: k.record.started_at or 0)
    assert (first.record.ended_at or 0) <= (second.record.started_at or 0), "max=1 was exceeded"
    assert any(e.phase == "PENDING" for e in second.events), "the policy queued the second"
    assert [runs(tmp_path, "nap1"), runs(tmp_path, "nap2")] == [1, 1]


async def test_a_failed_child_execution_fails_its_launch_plan_node(
    sqlite_url: str, cf: ModuleType, tmp_path: Path
) -> None:
    from sluice.api import run_async

    settings = fast_settings(sqlite_url)
    final = await run_async(cf.calls_a_failing_plan, {"directory": str(tmp_path)}, settings)
    assert final.phase is ExecutionPhase.FAILED
    error = final.error or {}
    assert error["node"] == "failing_plan" and "ended FAILED" in error["message"]
    assert "1 of 2 items failed" in error["message"]


async def test_aborting_a_launch_plan_node_aborts_its_child_execution(
    sqlite_url: str, cf: ModuleType, tmp_path: Path
) -> None:
    from sluice.spec.compound import child_execution_id

    rt = await Runtime.open(fast_settings(sqlite_url))
    try:
        record = await rt.launch(cf.calls_a_slow_plan, {"directory": str(tmp_path)})
        engine = await rt.engine()
        await engine.start()
        child_id = child_execution_id(record.id, "slow_plan")
        await _until(rt, record.id, lambda o: runs(tmp_path, "nap3") == 1)
        await request_abort(rt.store, rt.notifier, rt.clock, record.id, "test abort")
        await asyncio.wait_for(engine.wait(record.id), 30)
        await asyncio.wait_for(engine.wait(child_id), 30)
        await engine.stop()
        parent, child = await outcome(rt, record.id), await outcome(rt, child_id)
    finally:
        await rt.close()
    assert parent.record.phase is ExecutionPhase.ABORTED
    assert parent.nodes["slow_plan"].phase is NodePhase.ABORTED
    assert child.record.phase is ExecutionPhase.ABORTED
    assert child.nodes["nap"].phase is NodePhase.ABORTED


async def test_each_item_claims_its_quota_and_locks(
    sqlite_url: str, cf: ModuleType, tmp_path: Path
) -> None:
    from sluice.config import load_config

    settings = load_config(
        database_url=sqlite_url,
        engine={"workers": 4, "backoff_base": 0.05, "resync_interval": 2.0},
        resources={"quotas": {"compound-api": 2}},
    )
    rt = await Runtime.open(settings)
    try:
        keys = [1, 2, 1, 3, 1, 4]
        result = await run(rt, cf.guarded_map, keys=keys, directory=str(tmp_path))
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": keys}
    held: dict[str, list[float]] = {}
    for event in result.events:
        if event.phase in ("GRANTED", "RELEASED") and event.node_id.startswith("map_guarded["):
            held.setdefault(event.node_id, []).append(event.occurred_at)
    spans = {node: (times[0], times[-1]) for node, times in held.items()}
    assert len(spans) == len(keys), "every item claimed and gave back its own tokens"

    def peak(nodes: list[str]) -> int:
        edges = sorted([(spans[n][0], 1) for n in nodes] + [(spans[n][1], -1) for n in nodes])
        active = top = 0
        for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
            active += step
            top = max(top, active)
        return top

    assert peak(list(spans)) <= 2, "the quota of 2 was exceeded across items"
    same_key = [f"map_guarded[{i}]" for i, k in enumerate(keys) if k == 1]
    assert peak(same_key) == 1, "items with the same lock overlapped"
