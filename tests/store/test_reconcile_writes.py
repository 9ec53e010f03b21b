"""The engine's one-trip reconcile write on SQLite (store/reconcile_writes.py) writes exactly
what the repository path writes, and nothing at all when the lease or a version is wrong."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.spec.phases import CacheStatus, NodePhase, ReservationStatus
from sluice.store.reconcile_writes import ReconcileWrites, WriteOutcome
from sluice.store.records import EventRecord, NodeRecord
from sluice.store.store import Store
from support.records import running_execution

T0 = 1_700_000_000.0
OWNER = "engine-a"
EPOCH = 1


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(f"sqlite:///{tmp_path / 'w.db'}")
    record = running_execution("e1", T0)
    async with opened.write() as repos:
        assert await repos.executions.insert(record)
        assert await repos.executions.claim("e1", OWNER, T0, 30) == EPOCH
        await repos.nodes.insert_many([NodeRecord("e1", "a"), NodeRecord("e1", "b")])
    yield opened
    await opened.close()


async def stored(store: Store) -> tuple[dict[str, NodeRecord], list[EventRecord]]:
    async with store.read() as repos:
        nodes = {n.node_id: n for n in await repos.nodes.list("e1")}
        return nodes, await repos.events.list("e1")


def changed(node: NodeRecord) -> NodeRecord:
    return dataclasses.replace(
        node,
        phase=NodePhase.RUNNING,
        task_phase=5,
        phase_version=2,
        reason="running, with 'quotes' and unicode: é",
        attempt=1,
        plugin_state={"job": "j-1", "polls": [1, 2]},
        plugin_state_version=3,
        inputs={"a": 1, "nested": {"x": [None, True]}},
        cache_status=CacheStatus.MISS,
        reservation_status=ReservationStatus.ACQUIRED,
        claims={"quotas": [["hive", 1]]},
        started_at=T0,
        attempt_started_at=T0 + 1,
        updated_at=T0 + 2,
    )


def event(node_id: str, phase: str) -> EventRecord:
    return EventRecord("e1", phase, T0 + 3, node_id, 1, 2, "why", {"code": "x"})


async def test_written_rows_read_back_as_the_records(store: Store) -> None:
    writes = ReconcileWrites.for_database(store.db)
    assert writes is not None
    nodes, _ = await stored(store)
    records = [changed(nodes["a"]), changed(nodes["b"])]
    events = [event("a", "RUNNING"), event("b", "QUEUED")]
    outcome = await writes.write("e1", OWNER, EPOCH, T0 + 30, 30, records, events)
    assert outcome is WriteOutcome.WRITTEN
    assert [r.version for r in records] == [1, 1]
    after, history = await stored(store)
    assert after == {r.node_id: r for r in records}
    assert [(e.node_id, e.phase, e.info, e.reason) for e in history] == [
        ("a", "RUNNING", {"code": "x"}, "why"),
        ("b", "QUEUED", {"code": "x"}, "why"),
    ]
    async with store.read() as repos:
        execution = await repos.executions.get("e1")
    assert execution is not None and execution.owner_expires_at == T0 + 60


async def test_a_lost_lease_writes_nothing(store: Store) -> None:
    writes = ReconcileWrites.for_database(store.db)
    assert writes is not None
    nodes, _ = await stored(store)
    records = [changed(nodes["a"])]
    outcome = await writes.write(
        "e1", "engine-b", EPOCH, T0 + 30, 30, records, [event("a", "RUNNING")]
    )
    assert outcome is WriteOutcome.LEASE_LOST
    assert records[0].version == 0
    assert await stored(store) == (nodes, [])


async def test_a_write_from_an_earlier_epoch_writes_nothing(store: Store) -> None:
    """The owner claimed the execution again (a new epoch): what its earlier ownership still
    had in flight is refused, so a stale reconcile cannot overwrite the reloaded state."""
    writes = ReconcileWrites.for_database(store.db)
    assert writes is not None
    async with store.write() as repos:
        assert await repos.executions.claim("e1", OWNER, T0 + 1, 30) == EPOCH + 1
    nodes, _ = await stored(store)
    records = [changed(nodes["a"])]
    outcome = await writes.write("e1", OWNER, EPOCH, T0 + 2, 30, records, [])
    assert outcome is WriteOutcome.LEASE_LOST
    assert await stored(store) == (nodes, [])


async def test_one_stale_node_writes_nothing(store: Store) -> None:
    writes = ReconcileWrites.for_database(store.db)
    assert writes is not None
    nodes, _ = await stored(store)
    stale = changed(nodes["b"])
    stale.version = 7
    records = [changed(nodes["a"]), stale]
    outcome = await writes.write("e1", OWNER, EPOCH, T0 + 30, 30, records, [event("a", "RUNNING")])
    assert outcome is WriteOutcome.NODE_CHANGED
    assert [r.version for r in records] == [0, 7]
    assert await stored(store) == (nodes, [])
    async with store.read() as repos:
        execution = await repos.executions.get("e1")
    assert execution is not None and execution.owner_expires_at == T0 + 30  # rolled back


async def test_postgresql_keeps_the_repository_path(store: Store) -> None:
    store.db.dialect = "postgresql"  # type: ignore[misc]
    try:
        assert ReconcileWrites.for_database(store.db) is None
    finally:
        store.db.dialect = "sqlite"  # type: ignore[misc]


async def test_a_write_waits_for_another_process_holding_the_lock(store: Store) -> None:
    """The loop-thread attempt never waits; a worker thread does, then writes."""
    import sqlite3

    writes = ReconcileWrites.for_database(store.db)
    assert writes is not None and store.db.url.path is not None
    other = sqlite3.connect(store.db.url.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another process mid-transaction
    nodes, _ = await stored(store)
    records = [changed(nodes["a"])]
    writing = asyncio.ensure_future(
        writes.write("e1", OWNER, EPOCH, T0 + 30, 30, records, [event("a", "RUNNING")])
    )
    await asyncio.sleep(0.2)
    assert not writing.done()
    other.execute("COMMIT")
    other.close()
    assert await asyncio.wait_for(writing, 10) is WriteOutcome.WRITTEN
    after, history = await stored(store)
    assert after["a"] == records[0] and [e.phase for e in history] == ["RUNNING"]
