"""Quotas and locks in the engine: claimed all or nothing after a slot, released in finalize,
with the waiting task's reason naming what blocks it. Every test runs with the store's database
(SQLite), PostgreSQL and Redis as the resource backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from support.engine import fast_settings, outcome, run
from support.intervals import max_overlap, read


async def _open(sqlite_url: str, resources: dict[str, Any]) -> Runtime:
    engine = fast_settings(sqlite_url).engine.model_dump()
    return await Runtime.open(
        load_config(database_url=sqlite_url, engine=engine, resources=resources)
    )


@pytest.fixture
async def runtime(sqlite_url: str, resources: dict[str, Any]) -> AsyncIterator[Runtime]:
    rt = await _open(sqlite_url, resources)
    yield rt
    await rt.close()


@pytest.fixture
async def quota_runtime(sqlite_url: str, resources: dict[str, Any]) -> AsyncIterator[Runtime]:
    rt = await _open(sqlite_url, {**resources, "quotas": {"warehouse": 1}, "lease": 5.0})
    yield rt
    await rt.close()


async def test_quota_of_one_serialises_tasks_and_explains_the_wait(
    quota_runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    record = await quota_runtime.launch(flows.warehouse_fan, {"directory": str(tmp_path)})
    engine = await quota_runtime.engine(only=[record.id])
    await engine.start()
    reasons: set[str] = set()

    async def watch() -> None:
        while True:
            current = await outcome(quota_runtime, record.id)
            reasons.update(n.reason for n in current.nodes.values() if n.task_phase == 2)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(engine.wait(record.id), 60)
    watcher.cancel()
    await engine.stop()
    result = await outcome(quota_runtime, record.id)
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    intervals = read(tmp_path / "warehouse.intervals")
    assert len(intervals) == 4
    assert max_overlap(intervals) == 1
    assert any(r.startswith("waiting for warehouse: 1/1 in use, position") for r in reasons), (
        reasons
    )
    assert all(n.claims is None for n in result.nodes.values()), "tokens were released"
    snapshot = await quota_runtime.resources.describe("warehouse")
    assert snapshot[0].in_use == 0


async def test_unknown_quota_namespace_fails_naming_it(runtime: Runtime, flows: ModuleType) -> None:
    result = await run(runtime, flows.unknown_quota)
    assert result.record.phase is ExecutionPhase.FAILED
    error = result.record.error or {}
    assert error["code"] == "BadClaim" and "nowhere" in error["message"]


async def test_locks_from_inputs_never_have_two_holders(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, flows.partition_writes, directory=str(tmp_path))
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    for partition in (1, 2, 3, 4):
        intervals = read(tmp_path / f"p{partition}.intervals")
        assert intervals and max_overlap(intervals) == 1, f"partition {partition}"
    assert all(n.claims is None for n in result.nodes.values())


def test_engine_tokens_are_composed_like_every_stored_token() -> None:
    """Two tasks never share a token, whatever `:` or `-` their scope or ids hold."""
    from types import SimpleNamespace

    from sluice.engine.claims import ClaimsGate
    from sluice.resources import Holder, compose_token

    def token(project: str, domain: str, execution: str, node: str, epoch: int = 1) -> str:
        record = SimpleNamespace(project=project, domain=domain, id=execution, owner_epoch=epoch)
        return ClaimsGate.token(SimpleNamespace(record=record), SimpleNamespace(id=node))  # type: ignore[arg-type]

    assert token("p", "d", "x1", "n0") == "ex:p:d:x1-n0@1"
    assert token("p", "d", "x1", "n0", epoch=2) == "ex:p:d:x1-n0@2"  # a new owner's name
    assert token("a:b", "c", "x", "n") != token("a", "b:c", "x", "n")
    assert token("p", "d", "x-a", "n") != token("p", "d", "x", "a-n")
    assert token("p", "d", "x1", "n0") == compose_token(Holder("p", "d", "x1", "n0"), "n0") + "@1"
