"""The cache in the engine: a hit runs nothing, overwrite skips the lookup, and concurrent
runs of a serializable task compute once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest

from sluice.cache import CacheEntry, Reservation
from sluice.runtime import Runtime
from sluice.spec.phases import CacheStatus, ExecutionPhase, ReservationStatus
from support.engine import outcome, run


def _runs(directory: Path, name: str) -> int:
    path = directory / name
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_second_run_is_a_hit_without_running_the_task(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    first = await run(runtime, flows.cached, directory=str(tmp_path))
    second = await run(runtime, flows.cached, directory=str(tmp_path))
    assert first.nodes["cached_double"].cache_status is CacheStatus.POPULATED
    assert second.nodes["cached_double"].cache_status is CacheStatus.HIT
    assert second.record.outputs == first.record.outputs == {"o0": 8}
    assert _runs(tmp_path, "cached_double.count") == 1
    hit = [e for e in second.events if e.node_id == "cached_double"]
    assert [e.phase for e in hit] == ["SUCCESS"] and "cache hit" in hit[0].reason
    other = await run(runtime, flows.cached, directory=str(tmp_path), x=5)
    assert other.nodes["cached_double"].cache_status is CacheStatus.POPULATED


async def test_overwrite_cache_skips_the_lookup_and_overwrites(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    await run(runtime, flows.cached, directory=str(tmp_path))
    record = await runtime.launch(
        flows.cached, {"directory": str(tmp_path)}, options={"overwrite_cache": True}
    )
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    await engine.wait(record.id)
    await engine.stop()
    result = await outcome(runtime, record.id)
    assert result.nodes["cached_double"].cache_status is CacheStatus.POPULATED
    assert _runs(tmp_path, "cached_double.count") == 2


async def test_concurrent_serializable_runs_compute_once(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "hold").touch()
    records = [await runtime.launch(flows.herd, {"directory": str(tmp_path)}) for _ in range(3)]
    engine = await runtime.engine(only=[r.id for r in records])
    await engine.start()

    async def someone_waits() -> None:
        while True:
            nodes = [(await outcome(runtime, r.id)).nodes["expensive"] for r in records]
            if any(n.task_phase == 9 for n in nodes) and _runs(tmp_path, "expensive.runs"):
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(someone_waits(), 30)
    waiting = [(await outcome(runtime, r.id)).nodes["expensive"] for r in records]
    reasons = [n.reason for n in waiting if n.task_phase == 9]
    assert reasons and all("reservation owner" in r for r in reasons)
    (tmp_path / "hold").unlink()
    await asyncio.wait_for(asyncio.gather(*(engine.wait(r.id) for r in records)), 60)
    await engine.stop()
    results = [await outcome(runtime, r.id) for r in records]
    assert all(r.record.phase is ExecutionPhase.SUCCEEDED for r in results)
    assert {r.record.outputs["o0"] for r in results if r.record.outputs} == {42}
    assert _runs(tmp_path, "expensive.runs") == 1
    statuses = sorted(r.nodes["expensive"].cache_status.value for r in results)
    assert statuses == ["HIT", "HIT", "POPULATED"]
    owner = next(r for r in results if r.nodes["expensive"].cache_status is CacheStatus.POPULATED)
    assert owner.nodes["expensive"].reservation_status is ReservationStatus.RELEASED


async def test_a_result_put_between_lookup_and_claim_is_used_not_recomputed(
    runtime: Runtime,
    flows: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The previous owner puts and releases after this node's lookup missed and before its
    # claim: the claim succeeds, and the node must find the result rather than compute it.
    catalog = await runtime.open_catalog()
    claim = catalog.get_or_extend_reservation
    finished_first: list[str] = []

    async def previous_owner_finishes_in_between(
        key: str, owner_id: str, heartbeat: float
    ) -> Reservation:
        if not finished_first:
            finished_first.append(key)
            await claim(key, "xprev/expensive", heartbeat)
            await catalog.put(key, CacheEntry({"o0": 42}, "expensive", "1"))
            await catalog.release_reservation(key, "xprev/expensive")
        return await claim(key, owner_id, heartbeat)

    monkeypatch.setattr(catalog, "get_or_extend_reservation", previous_owner_finishes_in_between)
    result = await run(runtime, flows.herd, directory=str(tmp_path))
    assert finished_first
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert result.record.outputs == {"o0": 42}
    assert _runs(tmp_path, "expensive.runs") == 0
    node = result.nodes["expensive"]
    assert node.cache_status is CacheStatus.HIT
    assert node.reservation_status is ReservationStatus.RELEASED
    assert await catalog.list_reservations() == []
