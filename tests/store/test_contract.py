"""The store contract, one suite run on SQLite and on PostgreSQL (the `store_url` fixture).

Covers opening and migrating, every repository, and races between real processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import multiprocessing
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from tests.support import foundation_flows as flows

from sluice.errors import NotFoundError, StoreError
from sluice.spec.phases import (
    ACTIVE_EXECUTION_PHASES,
    TERMINAL_EXECUTION_PHASES,
    CacheStatus,
    ExecutionPhase,
    NodePhase,
    ReservationStatus,
)
from sluice.store import schema
from sluice.store.migrate import head_revision
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord
from sluice.store.store import Repos, Store

T0 = 1_700_000_000.0
P, D = "proj", "dev"
Q = ExecutionPhase.QUEUED
R = ExecutionPhase.RUNNING


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(store_url, upgrade=True)
    yield opened
    await opened.close()


@pytest.fixture
def fresh_url(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A database that has never been opened by sluice, on the same backend."""
    if store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh' / 'nested' / 'sluice.db'}"
        return
    import psycopg

    base, _, _ = store_url.rpartition("/")
    name = f"sluice_fresh_{secrets.token_hex(4)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{base}/{name}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def execution(
    execution_id: str,
    phase: ExecutionPhase = Q,
    *,
    created_at: float = T0,
    project: str = P,
    domain: str = D,
    **fields: Any,
) -> ExecutionRecord:
    return ExecutionRecord(
        id=execution_id,
        project=project,
        domain=domain,
        workflow_name="wf",
        workflow_version="v1",
        phase=phase,
        inputs={"x": 1},
        created_at=created_at,
        updated_at=created_at,
        **fields,
    )


async def insert(store: Store, *records: ExecutionRecord) -> None:
    async with store.write() as repos:
        for record in records:
            assert await repos.executions.insert(record), record.id


async def get(store: Store, execution_id: str) -> ExecutionRecord:
    async with store.read() as repos:
        found = await repos.executions.get(execution_id)
    assert found is not None, execution_id
    return found


class Rollback(Exception):
    """Raised to leave a write transaction without committing."""


@contextlib.asynccontextmanager
async def rolled_back(store: Store) -> AsyncIterator[Repos]:
    """A write transaction that ends by raising, so the database rolls it back."""
    with contextlib.suppress(Rollback):
        async with store.write() as repos:
            yield repos
            raise Rollback


# --- opening ---------------------------------------------------------------------------------


async def _revision(store: Store) -> str:
    async with store.read() as repos:
        return str(
            (
                await repos.conn.execute(sa.text("SELECT version_num FROM alembic_version"))
            ).scalar_one()
        )


async def test_open_creates_the_schema_on_a_fresh_database(fresh_url: str) -> None:
    store = await Store.open(fresh_url, upgrade=True)
    try:
        assert await _revision(store) == head_revision()
        async with store.read() as repos:
            assert await repos.executions.find() == []
    finally:
        await store.close()


async def test_opening_twice_and_concurrently_is_fine(fresh_url: str) -> None:
    stores = await asyncio.gather(*(Store.open(fresh_url, upgrade=True) for _ in range(3)))
    try:
        await insert(stores[0], execution("e1"))
        assert (await get(stores[1], "e1")).id == "e1"
    finally:
        for opened in stores:
            await opened.close()
    again = await Store.open(fresh_url, upgrade=False)
    try:
        assert await _revision(again) == head_revision()
        assert (await get(again, "e1")).id == "e1"
    finally:
        await again.close()


async def test_migrations_create_exactly_the_declared_schema(fresh_url: str) -> None:
    """schema.py and the Alembic migrations describe the same tables, columns, types and
    indexes: a table added to one and not the other is caught here, on both backends."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    def differences(conn: sa.Connection) -> list[Any]:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, schema.metadata))

    store = await Store.open(fresh_url, upgrade=True)
    try:
        async with store.read() as repos:
            assert await repos.conn.run_sync(differences) == []
    finally:
        await store.close()


# --- executions ------------------------------------------------------------------------------


async def test_execution_insert_get_round_trip(store: Store) -> None:
    record = execution(
        "e-full",
        R,
        launch_plan="lp",
        launch_plan_version="lpv",
        reason="started",
        outputs={"o0": [1, 2.5, "three", None, {"nested": True}]},
        error={"code": "E", "message": "m", "kind": "USER"},
        options={"overwrite_cache": True},
        priority=7,
        started_at=T0 + 1,
        scheduled_at=T0 - 60,
        owner="engine-1",
        owner_expires_at=T0 + 30,
        version=3,
    )
    await insert(store, record)
    found = await get(store, "e-full")
    assert found == record
    assert found.phase is ExecutionPhase.RUNNING
    assert found.workflow_key == "wf@v1"
    async with store.read() as repos:
        assert await repos.executions.get("nope") is None


async def test_duplicate_execution_id_returns_false_and_keeps_the_first(store: Store) -> None:
    await insert(store, execution("e1", reason="first"))
    async with store.write() as repos:
        assert await repos.executions.insert(execution("e1", R, reason="second")) is False
    found = await get(store, "e1")
    assert (found.phase, found.reason) == (Q, "first")


async def test_one_execution_per_schedule_firing(store: Store) -> None:
    firing = {"launch_plan": "nightly", "scheduled_at": T0}
    await insert(store, execution("fire-1", **firing))
    async with store.write() as repos:
        assert await repos.executions.insert(execution("fire-2", **firing)) is False
        assert await repos.executions.insert(
            execution("fire-3", launch_plan="nightly", scheduled_at=T0 + 60)
        )
        assert await repos.executions.insert(execution("fire-4", project="other", **firing))
        assert await repos.executions.insert(execution("fire-5", domain="prod", **firing))
        assert await repos.executions.insert(
            execution("fire-6", launch_plan="hourly", scheduled_at=T0)
        )
    # Executions that are not firings (no scheduled_at) never collide.
    await insert(store, execution("adhoc-1", launch_plan="nightly"))
    await insert(store, execution("adhoc-2", launch_plan="nightly"))
    async with store.read() as repos:
        assert await repos.executions.get("fire-2") is None


async def test_find_filters(store: Store) -> None:
    await insert(
        store,
        execution("a", Q, created_at=T0 + 1, launch_plan="lp1"),
        execution("b", R, created_at=T0 + 2, launch_plan="lp1"),
        execution("c", ExecutionPhase.SUCCEEDED, created_at=T0 + 3, launch_plan="lp2"),
        execution("d", Q, created_at=T0 + 4, project="other"),
        execution("e", ExecutionPhase.PENDING, created_at=T0 + 5, domain="prod"),
    )

    async def ids(**filters: Any) -> list[str]:
        async with store.read() as repos:
            return [r.id for r in await repos.executions.find(**filters)]

    assert await ids() == ["e", "d", "c", "b", "a"]  # newest first by default
    assert await ids(oldest_first=True) == ["a", "b", "c", "d", "e"]
    assert await ids(phases=[Q]) == ["d", "a"]
    assert await ids(phases=[Q, R], project=P) == ["b", "a"]
    assert await ids(phases=[]) == []
    assert await ids(project="other") == ["d"]
    assert await ids(domain="prod") == ["e"]
    assert await ids(launch_plan="lp1") == ["b", "a"]
    assert await ids(ids=["a", "c", "zz"]) == ["c", "a"]
    assert await ids(ids=[]) == []
    assert await ids(limit=2) == ["e", "d"]
    assert await ids(limit=2, oldest_first=True) == ["a", "b"]
    assert await ids(limit=None) == ["e", "d", "c", "b", "a"]


async def test_find_breaks_creation_time_ties_by_id(store: Store) -> None:
    await insert(store, execution("y"), execution("x"), execution("z"))
    async with store.read() as repos:
        assert [r.id for r in await repos.executions.find()] == ["x", "y", "z"]
        assert [r.id for r in await repos.executions.find(oldest_first=True)] == ["x", "y", "z"]


async def test_compare_and_set_phase_wins_only_from_an_expected_phase(store: Store) -> None:
    await insert(store, execution("e1", Q))
    async with store.write() as repos:
        lost = await repos.executions.compare_and_set_phase(
            "e1", [R, ExecutionPhase.PENDING], ExecutionPhase.SUCCEEDED, T0 + 5
        )
    assert lost is False
    unchanged = await get(store, "e1")
    assert (unchanged.phase, unchanged.version, unchanged.updated_at) == (Q, 0, T0)

    async with store.write() as repos:
        won = await repos.executions.compare_and_set_phase(
            "e1", [Q], R, T0 + 10, reason="picked up", started_at=T0 + 10
        )
    assert won is True
    running = await get(store, "e1")
    assert (running.phase, running.reason, running.started_at) == (R, "picked up", T0 + 10)
    assert (running.updated_at, running.version, running.ended_at) == (T0 + 10, 1, None)

    async with store.write() as repos:
        assert not await repos.executions.compare_and_set_phase("e1", [Q], R, T0 + 11)
        assert not await repos.executions.compare_and_set_phase("missing", [Q], R, T0)


@pytest.mark.parametrize("terminal", sorted(TERMINAL_EXECUTION_PHASES))
async def test_terminal_phases_set_ended_at(store: Store, terminal: ExecutionPhase) -> None:
    await insert(store, execution("e1", R))
    async with store.write() as repos:
        assert await repos.executions.compare_and_set_phase(
            "e1", [R], terminal, T0 + 20, outputs={"o0": 1}
        )
    done = await get(store, "e1")
    assert (done.phase, done.ended_at, done.outputs, done.version) == (
        terminal,
        T0 + 20,
        {"o0": 1},
        1,
    )


async def test_explicit_ended_at_is_kept(store: Store) -> None:
    await insert(store, execution("e1", R))
    async with store.write() as repos:
        assert await repos.executions.compare_and_set_phase(
            "e1", [R], ExecutionPhase.FAILED, T0 + 20, ended_at=T0 + 15
        )
    assert (await get(store, "e1")).ended_at == T0 + 15


async def test_compare_and_set_phase_in_a_rolled_back_transaction_changes_nothing(
    store: Store,
) -> None:
    await insert(store, execution("e1", Q))
    async with rolled_back(store) as repos:
        assert await repos.executions.compare_and_set_phase("e1", [Q], R, T0 + 1)
    assert (await get(store, "e1")).phase is Q


# --- ownership ---------------------------------------------------------------------------------


async def test_claim_hold_renew_release(store: Store) -> None:
    await insert(store, execution("e1", R), execution("e2", Q), execution("e3", R))
    lease = 30.0
    async with store.write() as repos:
        ex = repos.executions
        assert await ex.claim("e1", "A", T0, lease) == 1
        assert await ex.claim("e1", "A", T0 + 1, lease) == 2  # a re-claim is a new epoch
        assert await ex.claim("e1", "B", T0 + 10, lease) is None  # lease still running
        assert await ex.claim("e1", "B", T0 + 1 + lease, lease) is None  # expiry is exclusive
        assert await ex.hold("e1", "A", 2, T0 + 70, lease)  # A extends its lease to T0 + 100
        assert not await ex.hold("e1", "A", 1, T0 + 70, lease)  # an earlier epoch's write
        assert await ex.claim("e1", "B", T0 + 50, lease) is None
        assert not await ex.hold("e1", "B", 2, T0 + 170, lease)  # B does not own it
        assert await ex.claim("e2", "A", T0, lease) == 1
        assert await ex.claim("e3", "B", T0, lease) == 1
        assert await ex.renew("A", ["e1", "e2", "e3", "missing"], T0 + 270, lease) == {
            "e1",
            "e2",
        }
        assert await ex.renew("A", [], T0 + 270, lease) == set()
    owned = await get(store, "e1")
    assert (owned.owner, owned.owner_expires_at, owned.owner_epoch) == ("A", T0 + 300, 2)
    assert (await get(store, "e3")).owner_expires_at == T0 + lease  # B's untouched

    async with store.write() as repos:
        await repos.executions.release("e1", "B")  # not B's: nothing happens
    assert (await get(store, "e1")).owner == "A"
    async with store.write() as repos:
        await repos.executions.release("e1", "A")
        assert await repos.executions.claim("e1", "B", T0 + 1, 30) == 3  # free again
    released = await get(store, "e1")
    assert (released.owner, released.owner_expires_at) == ("B", T0 + 31)


async def test_another_owner_claims_after_the_lease_expires(store: Store) -> None:
    await insert(store, execution("e1", R))
    async with store.write() as repos:
        assert await repos.executions.claim("e1", "A", T0, 30) == 1
    async with store.write() as repos:
        assert await repos.executions.claim("e1", "B", T0 + 30.001, 30) == 2
        assert not await repos.executions.hold("e1", "A", 1, T0 + 60, 30)  # A lost it
        assert not await repos.executions.hold("e1", "B", 1, T0 + 60, 30)  # not B's epoch
        assert await repos.executions.renew("A", ["e1"], T0 + 60, 30) == set()
    assert (await get(store, "e1")).owner == "B"


async def test_leases_are_judged_on_the_stores_clock(store: Store) -> None:
    """With no time given (production), claims, holds and renewals read the store's clock:
    a lease written by a clock far ahead or behind is judged by the store's time, and a new
    lease ends a lease after the store's time whatever the engine's clock says."""
    await insert(store, execution("past", R), execution("now", R))
    ahead = time.time() + 3600
    async with store.write() as repos:
        assert await repos.executions.claim("past", "A", T0, 30) == 1  # lapsed long ago
        assert await repos.executions.claim("now", "A", None, 30) == 1
        assert await repos.executions.claimable("B", None, 10) == ["past"]
        assert await repos.executions.claim("now", "B", ahead, 30) == 2  # a clock an hour ahead
    async with store.write() as repos:
        assert await repos.executions.hold("now", "B", 2, None, 30)
        stored_now = await repos.executions.get("now")
        assert stored_now is not None and stored_now.owner_expires_at is not None
        assert stored_now.owner_expires_at < ahead  # the store's time, not the skewed one


async def test_pending_and_terminal_executions_are_never_claimable(store: Store) -> None:
    phases = [ExecutionPhase.PENDING, *sorted(TERMINAL_EXECUTION_PHASES)]
    await insert(store, *(execution(f"e-{p.value}", p) for p in phases))
    await insert(store, *(execution(f"ok-{p.value}", p) for p in sorted(ACTIVE_EXECUTION_PHASES)))
    async with store.write() as repos:
        for phase in phases:
            assert await repos.executions.claim(f"e-{phase.value}", "A", T0, 30) is None, phase
        claimable = await repos.executions.claimable("A", T0, limit=100)
    assert sorted(claimable) == sorted(f"ok-{p.value}" for p in ACTIVE_EXECUTION_PHASES)


async def test_claimable_orders_by_priority_then_age_and_skips_live_leases(store: Store) -> None:
    await insert(
        store,
        execution("old", R, created_at=T0),
        execution("new", R, created_at=T0 + 5),
        execution("urgent", R, created_at=T0 + 9, priority=5),
        execution("held", R, created_at=T0 - 5),
        execution("lapsed", R, created_at=T0 - 4),
    )
    async with store.write() as repos:
        assert await repos.executions.claim("held", "B", T0, 100)
        assert await repos.executions.claim("lapsed", "B", T0, 1)
        assert await repos.executions.claimable("A", T0 + 10, limit=10) == [
            "urgent",
            "lapsed",
            "old",
            "new",
        ]
        assert await repos.executions.claimable("A", T0 + 10, limit=2) == ["urgent", "lapsed"]
        assert "held" in await repos.executions.claimable("B", T0 + 10, limit=10)


async def test_claimable_among_ids_and_owners_of_live_leases(store: Store) -> None:
    await insert(
        store,
        execution("a", R, created_at=T0),
        execution("b", R, created_at=T0 + 1),
        execution("c", R, created_at=T0 + 2),
        execution("d", R, created_at=T0 + 3),
    )
    async with store.write() as repos:
        assert await repos.executions.claim("a", "B", T0, 100)
        assert await repos.executions.claim("b", "B", T0, 100)
        assert await repos.executions.claim("c", "C", T0, 1)  # lapses at T0 + 1
        assert await repos.executions.claimable("A", T0 + 10, 10, ids=["c", "d", "a"]) == [
            "c",
            "d",
        ]
        assert await repos.executions.other_owners("A", T0 + 10) == {"B"}
        assert await repos.executions.other_owners("B", T0 + 10) == set()
        assert await repos.executions.release_all("B") == 2
        assert await repos.executions.other_owners("A", T0 + 10) == set()
        assert await repos.executions.claimable("A", T0 + 10, 10) == ["a", "b", "c", "d"]


async def test_count_active_counts_exactly_the_active_phases(store: Store) -> None:
    records = [execution(f"lp-{p.value}", p, launch_plan="lp") for p in ExecutionPhase] + [
        execution("other-lp", R, launch_plan="lp2"),
        execution("other-project", R, launch_plan="lp", project="elsewhere"),
        execution("other-domain", R, launch_plan="lp", domain="prod"),
        execution("no-lp", R),
    ]
    await insert(store, *records)
    async with store.read() as repos:
        assert await repos.executions.count_active(P, D, "lp") == len(ACTIVE_EXECUTION_PHASES) == 5
        assert await repos.executions.count_active(P, D, "lp2") == 1
        assert await repos.executions.count_active(P, D, "none") == 0
    assert {p for p in ExecutionPhase if p.is_active} == {
        Q,
        R,
        ExecutionPhase.SUCCEEDING,
        ExecutionPhase.FAILING,
        ExecutionPhase.ABORTING,
    }


# --- nodes -------------------------------------------------------------------------------------


def node(node_id: str, execution_id: str = "e1", **fields: Any) -> NodeRecord:
    return NodeRecord(execution_id=execution_id, node_id=node_id, **fields)


async def nodes_of(store: Store, execution_id: str = "e1") -> dict[str, NodeRecord]:
    async with store.read() as repos:
        return {n.node_id: n for n in await repos.nodes.list(execution_id)}


async def test_nodes_insert_many_list_get(store: Store) -> None:
    full = node(
        "full",
        phase=NodePhase.RUNNING,
        task_phase=5,
        phase_version=2,
        reason="running",
        attempt=1,
        system_failures=1,
        plugin_state={"job": "j-1", "polls": [1, 2]},
        plugin_state_version=3,
        inputs={"a": 1},
        outputs={"o0": 2},
        error={"code": "x"},
        cache_status=CacheStatus.MISS,
        reservation_status=ReservationStatus.ACQUIRED,
        claims={"quotas": [["hive", 1]]},
        started_at=T0,
        attempt_started_at=T0 + 1,
        next_attempt_at=T0 + 2,
        updated_at=T0 + 3,
        ended_at=None,
        version=4,
    )
    async with store.write() as repos:
        await repos.nodes.insert_many([full, node("plain"), node("x", execution_id="e2")])
        await repos.nodes.insert_many([])
    listed = await nodes_of(store)
    assert set(listed) == {"full", "plain"}
    assert listed["full"] == full
    assert listed["plain"] == node("plain")
    assert listed["full"].cache_status is CacheStatus.MISS
    async with store.read() as repos:
        assert await repos.nodes.get("e1", "full") == full
        assert await repos.nodes.get("e1", "x") is None
        assert await repos.nodes.list("nothing") == []


async def test_node_insert_of_an_existing_node_fails(store: Store) -> None:
    async with store.write() as repos:
        await repos.nodes.insert_many([node("a")])
    with pytest.raises(StoreError):
        async with store.write() as repos:
            await repos.nodes.insert_many([node("a")])


async def test_node_update_is_a_compare_and_swap_on_version(store: Store) -> None:
    async with store.write() as repos:
        await repos.nodes.insert_many([node("a")])
    current = (await nodes_of(store))["a"]
    stale = dataclasses.replace(current)
    current.phase, current.reason = NodePhase.RUNNING, "first writer"
    async with store.write() as repos:
        assert await repos.nodes.update(current)
    assert current.version == 1
    stale.phase, stale.reason = NodePhase.FAILED, "second writer"
    async with store.write() as repos:
        assert not await repos.nodes.update(stale)
    assert stale.version == 0  # a lost swap does not bump the caller's record
    stored = (await nodes_of(store))["a"]
    assert (stored.phase, stored.reason, stored.version) == (NodePhase.RUNNING, "first writer", 1)


async def test_update_many_with_one_stale_row_rejects_the_whole_batch(store: Store) -> None:
    async with store.write() as repos:
        await repos.nodes.insert_many([node("a"), node("b"), node("c")])
    batch = list((await nodes_of(store)).values())
    for record in batch:
        record.phase, record.reason = NodePhase.SUCCEEDED, "batch"
    batch[1].version = 7  # stale: the stored row is at version 0
    async with rolled_back(store) as repos:
        assert await repos.nodes.update_many(batch) is False
    assert [r.version for r in batch] == [0, 7, 0]
    stored = await nodes_of(store)
    assert {n.node_id: (n.phase, n.reason, n.version) for n in stored.values()} == {
        name: (NodePhase.NOT_STARTED, "", 0) for name in ("a", "b", "c")
    }


async def test_update_many_bumps_every_version(store: Store) -> None:
    async with store.write() as repos:
        await repos.nodes.insert_many([node("a"), node("b")])
    batch = list((await nodes_of(store)).values())
    for i, record in enumerate(batch):
        record.phase, record.plugin_state, record.attempt = NodePhase.RUNNING, {"i": i}, i + 1
    async with store.write() as repos:
        assert await repos.nodes.update_many(batch)
        assert await repos.nodes.update_many([])
    assert [r.version for r in batch] == [1, 1]
    stored = await nodes_of(store)
    assert stored == {r.node_id: r for r in batch}
    async with store.write() as repos:  # the same records again: now at the right version
        assert await repos.nodes.update_many(batch)
    assert {n.version for n in (await nodes_of(store)).values()} == {2}


async def test_update_many_of_a_missing_node_fails(store: Store) -> None:
    async with store.write() as repos:
        await repos.nodes.insert_many([node("a")])
    async with rolled_back(store) as repos:
        assert not await repos.nodes.update_many([node("a"), node("ghost")])
    assert (await nodes_of(store))["a"].version == 0


# --- events ----------------------------------------------------------------------------------


def event(execution_id: str, phase: str, i: int, **fields: Any) -> EventRecord:
    return EventRecord(execution_id=execution_id, phase=phase, occurred_at=T0 + i, **fields)


async def test_events_append_and_list_in_order(store: Store) -> None:
    async with store.write() as repos:
        await repos.events.append(
            [
                event("e1", "QUEUED", 1),
                event("e2", "QUEUED", 2),
                event("e1", "RUNNING", 3, node_id="n", attempt=1, phase_version=2, reason="r"),
            ]
        )
        await repos.events.append([])
    async with store.write() as repos:
        await repos.events.append([event("e1", "SUCCEEDED", 4, info={"outputs": {"o0": 1}})])
    async with store.read() as repos:
        everything = await repos.events.list()
        mine = await repos.events.list("e1")
        after = await repos.events.list("e1", after_id=mine[0].id or 0)
        limited = await repos.events.list(limit=2)
    assert [(e.execution_id, e.phase) for e in everything] == [
        ("e1", "QUEUED"),
        ("e2", "QUEUED"),
        ("e1", "RUNNING"),
        ("e1", "SUCCEEDED"),
    ]
    ids = [e.id for e in everything]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids) and len(set(ids)) == 4
    assert [e.phase for e in mine] == ["QUEUED", "RUNNING", "SUCCEEDED"]
    assert [e.phase for e in after] == ["RUNNING", "SUCCEEDED"]
    assert [e.phase for e in limited] == ["QUEUED", "QUEUED"]
    running = mine[1]
    assert (running.node_id, running.attempt, running.phase_version, running.reason) == (
        "n",
        1,
        2,
        "r",
    )
    assert mine[2].info == {"outputs": {"o0": 1}}
    assert mine[0].info is None and mine[0].occurred_at == T0 + 1


# --- specs -------------------------------------------------------------------------------------


async def test_put_workflow_is_idempotent_and_specs_read_back_equal(store: Store) -> None:
    spec = flows.outer.spec
    async with store.write() as repos:
        await repos.specs.put_workflow(P, D, spec, T0)
    async with store.write() as repos:
        await repos.specs.put_workflow(P, D, spec, T0 + 1)
        await repos.specs.put_workflow(P, D, flows.pipeline.spec, T0 + 1)  # shares tasks
    async with store.read() as repos:
        assert await repos.specs.get_workflow(P, D, spec.name, spec.version) == spec
        for task_spec in spec.tasks.values():
            assert await repos.specs.get_task(P, D, task_spec.name, task_spec.version) == task_spec
        assert await repos.specs.get_workflow("elsewhere", D, spec.name, spec.version) is None
        assert await repos.specs.get_workflow(P, D, spec.name, "other") is None
        assert await repos.specs.get_task(P, D, "no.task", "1") is None
        pipeline = flows.pipeline.spec
        assert await repos.specs.get_workflow(P, D, pipeline.name, pipeline.version) == pipeline


async def test_registered_specs_are_immutable(store: Store) -> None:
    spec = flows.pipeline.spec
    changed = spec.model_copy(update={"outputs": {}})
    async with store.write() as repos:
        await repos.specs.put_workflow(P, D, spec, T0)
        await repos.specs.put_workflow(P, D, changed, T0 + 1)
    async with store.read() as repos:
        assert await repos.specs.get_workflow(P, D, spec.name, spec.version) == spec


# --- launch plans ------------------------------------------------------------------------------


def plan(version: str, name: str = "nightly") -> Any:
    from sluice.spec.models import ConcurrencyPolicy, LaunchPlanSpec, Schedule

    return LaunchPlanSpec(
        name=name,
        version=version,
        workflow="wf@v1",
        default_inputs={"x": 1},
        schedule=Schedule(cron="0 3 * * *"),
        concurrency=ConcurrencyPolicy(1),
    )


async def active_version(store: Store, name: str = "nightly") -> str | None:
    async with store.read() as repos:
        record = await repos.launch_plans.active(P, D, name)
    return record.version if record else None


async def test_launch_plan_put_get_find(store: Store) -> None:
    from sluice.spec.models import LaunchPlanSpec

    async with store.write() as repos:
        lps = repos.launch_plans
        assert await lps.put(P, D, plan("v1"), T0)
        assert await lps.put(P, D, plan("v2"), T0 + 1)
        assert not await lps.put(P, D, plan("v1"), T0 + 2)  # a version exists once
        assert await lps.put(P, D, plan("v1", name="hourly"), T0 + 3)
        assert await lps.put("other", D, plan("v1"), T0 + 4)
    async with store.read() as repos:
        lps = repos.launch_plans
        record = await lps.get(P, D, "nightly", "v1")
        assert record is not None
        assert (record.state, record.workflow, record.created_at) == ("INACTIVE", "wf@v1", T0)
        assert LaunchPlanSpec.model_validate(record.spec) == plan("v1")
        assert await lps.get(P, D, "nightly", "v9") is None
        found = await lps.find(P, D)
        assert [(r.name, r.version) for r in found] == [
            ("hourly", "v1"),
            ("nightly", "v1"),
            ("nightly", "v2"),
        ]
        assert [(r.project, r.version) for r in await lps.find(name="nightly")] == [
            ("other", "v1"),  # ordered by project, domain, name, creation
            (P, "v1"),
            (P, "v2"),
        ]
        assert [r.project for r in await lps.find(name="nightly", project="other")] == ["other"]
        assert await lps.find(active_only=True) == []
        assert await lps.active(P, D, "nightly") is None


async def test_set_active_keeps_exactly_one_active_version(store: Store) -> None:
    async with store.write() as repos:
        for version in ("v1", "v2", "v3"):
            await repos.launch_plans.put(P, D, plan(version), T0)
        await repos.launch_plans.put(P, D, plan("v1", name="hourly"), T0)
    for version in ("v1", "v2", "v2", "v3"):
        async with store.write() as repos:
            await repos.launch_plans.set_active(P, D, "nightly", version, T0 + 10)
        assert await active_version(store) == version
        async with store.read() as repos:
            states = [r.state for r in await repos.launch_plans.find(P, D, "nightly")]
        assert states.count("ACTIVE") == 1
    async with store.write() as repos:
        await repos.launch_plans.set_active(P, D, "hourly", "v1", T0 + 11)
    assert (await active_version(store), await active_version(store, "hourly")) == ("v3", "v1")
    async with store.read() as repos:
        assert [r.name for r in await repos.launch_plans.find(active_only=True)] == [
            "hourly",
            "nightly",
        ]
    async with store.write() as repos:
        await repos.launch_plans.set_active(P, D, "nightly", None, T0 + 12)
    assert await active_version(store) is None
    assert await active_version(store, "hourly") == "v1"


async def test_activating_an_unknown_version_keeps_the_active_one(store: Store) -> None:
    """A typo in the version to activate must not silently leave the launch plan (and its
    schedule) with no active version."""
    async with store.write() as repos:
        await repos.launch_plans.put(P, D, plan("v1"), T0)
        await repos.launch_plans.set_active(P, D, "nightly", "v1", T0)
    refusal = ""
    try:
        async with store.write() as repos:
            await repos.launch_plans.set_active(P, D, "nightly", "v-typo", T0 + 1)
    except NotFoundError as exc:  # refusing is fine too, if it names the version
        refusal = str(exc) or "NotFoundError"
    assert refusal == "" or "v-typo" in refusal
    assert await active_version(store) == "v1"


async def test_a_second_active_row_is_refused_by_the_database(store: Store) -> None:
    async with store.write() as repos:
        await repos.launch_plans.put(P, D, plan("v1"), T0)
        await repos.launch_plans.set_active(P, D, "nightly", "v1", T0)
    row = {
        "project": P,
        "domain": D,
        "name": "nightly",
        "version": "v2",
        "workflow": "wf@v1",
        "spec": plan("v2").model_dump(mode="json"),
        "state": "ACTIVE",
        "created_at": T0,
        "updated_at": T0,
    }
    with pytest.raises(StoreError):
        async with store.write() as repos:
            await repos.conn.execute(sa.insert(schema.launch_plans).values(**row))
    async with store.write() as repos:  # another name may be ACTIVE at the same time
        await repos.conn.execute(sa.insert(schema.launch_plans).values(**{**row, "name": "x"}))
    assert await active_version(store) == "v1"


async def test_launch_plans_changed_since(store: Store) -> None:
    async with store.write() as repos:
        await repos.launch_plans.put(P, D, plan("v1"), T0)
        await repos.launch_plans.put(P, D, plan("v2"), T0 + 1)
        await repos.launch_plans.put(P, D, plan("v1", name="hourly"), T0 + 2)
    async with store.read() as repos:
        assert [(r.name, r.version) for r in await repos.launch_plans.changed_since(T0)] == [
            ("nightly", "v2"),
            ("hourly", "v1"),
        ]
    async with store.write() as repos:
        await repos.launch_plans.set_active(P, D, "nightly", "v1", T0 + 10)
    async with store.read() as repos:
        changed = await repos.launch_plans.changed_since(T0 + 5)
        assert [(r.version, r.state, r.updated_at) for r in changed] == [("v1", "ACTIVE", T0 + 10)]
        assert await repos.launch_plans.changed_since(T0 + 10) == []
    async with store.write() as repos:
        await repos.launch_plans.set_active(P, D, "nightly", "v2", T0 + 20)
    async with store.read() as repos:
        changed = await repos.launch_plans.changed_since(T0 + 10)
        assert sorted((r.version, r.state) for r in changed) == [
            ("v1", "INACTIVE"),
            ("v2", "ACTIVE"),
        ]


# --- races between real processes ------------------------------------------------------------

CONTENDERS = 6
TESTS_DIR = str(Path(__file__).resolve().parents[1])
Race = Callable[[str, str, str], list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def race() -> Iterator[Race]:
    """CONTENDERS spawned processes, started once (spawning is the slow part); each job makes
    all of them race on a database URL."""
    sys.path.insert(0, TESTS_DIR)  # spawned children copy sys.path and import the worker by name
    try:
        worker = importlib.import_module("support.foundation_workers")
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(CONTENDERS, timeout=120)
        jobs, results = ctx.Queue(), ctx.Queue()
        procs = [
            ctx.Process(target=worker.contend, args=(f"owner-{i}", jobs, barrier, results))
            for i in range(CONTENDERS)
        ]
        for proc in procs:
            proc.start()
    finally:
        sys.path.remove(TESTS_DIR)

    def run(url: str, cas_id: str, claim_id: str) -> list[tuple[Any, ...]]:
        for _ in procs:
            jobs.put((url, cas_id, claim_id))
        return [results.get(timeout=180) for _ in procs]

    yield run
    for _ in procs:
        jobs.put(None)
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * CONTENDERS


async def test_real_processes_race_exactly_one_wins(
    store: Store, store_url: str, race: Race
) -> None:
    await insert(store, execution("race-cas", Q), execution("race-claim", R))
    reports = await asyncio.to_thread(race, store_url, "race-cas", "race-claim")
    assert [r for r in reports if r[0] != "ok"] == []
    cas_winners = [owner for _, owner, won_cas, _ in reports if won_cas]
    claim_winners = [owner for _, owner, _, won_claim in reports if won_claim]
    assert len(cas_winners) == 1, reports
    assert len(claim_winners) == 1, reports
    cas = await get(store, "race-cas")
    assert (cas.phase, cas.reason, cas.version) == (R, cas_winners[0], 1)
    claimed = await get(store, "race-claim")
    assert claimed.owner == claim_winners[0]
