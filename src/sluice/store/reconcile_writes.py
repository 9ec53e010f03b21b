"""The engine's most frequent write on SQLite without a trip to the driver's thread.

A reconcile that changes only nodes and events (not the execution's phase) writes: its lease
held (UPDATE executions ... WHERE owner), each changed node a compare-and-swap on its version,
and its new events. Through SQLAlchemy's async layer that is six trips between the event loop
and aiosqlite's thread (BEGIN, three statements, COMMIT, the pool's reset) and the statements
built and compiled each time; measured, those trips and that building were most of a chain
step's cost (docs/performance.md). Here the SQL is written once, from the schema, and the
whole transaction (BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when the lease or a version does
not match) runs as one function: on a connection of its own in the event loop's thread when
SQLite's write lock is free (it never waits there), else in the driver's thread, which waits
for the lock and translates errors as every store error. The same statements, the same
atomicity, under the same in-process write lock.

PostgreSQL keeps the repository path (its driver has no thread hop to save).
"""

from __future__ import annotations

import enum
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sluice.store import schema
from sluice.store.database import Database
from sluice.store.records import EventRecord, NodeRecord

_KEYS = ("execution_id", "node_id")


class WriteOutcome(enum.Enum):
    WRITTEN = "written"
    LEASE_LOST = "lease_lost"
    """The execution is no longer held by this owner: nothing was written."""
    NODE_CHANGED = "node_changed"
    """A node was not at the version this engine read: nothing was written."""


def _columns(table: Any, skip: tuple[str, ...]) -> list[tuple[str, bool]]:
    """(column name, stored as JSON text) for each column of `table` not in `skip`."""
    return [(c.name, isinstance(c.type, schema.JSONText)) for c in table.c if c.name not in skip]


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


class ReconcileWrites:
    """Compiled once per store; `write` runs one reconcile's transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        assert db.url.path is not None, "ReconcileWrites is for SQLite"
        self._path = str(db.url.path)
        self._conn: sqlite3.Connection | None = None
        nodes = schema.node_executions
        self._node_columns = _columns(nodes, (*_KEYS, "version"))
        assignments = ", ".join(f"{name} = ?" for name, _ in self._node_columns)
        self._update_node = (
            f"UPDATE {nodes.name} SET {assignments}, version = ? "
            "WHERE execution_id = ? AND node_id = ? AND version = ?"
        )
        events = schema.events
        self._event_columns = _columns(events, ("id",))
        names = ", ".join(name for name, _ in self._event_columns)
        marks = ", ".join("?" for _ in self._event_columns)
        self._insert_event = f"INSERT INTO {events.name} ({names}) VALUES ({marks})"
        self._hold = (
            f"UPDATE {schema.executions.name} SET owner_expires_at = ? WHERE id = ? AND owner = ?"
        )

    def _here(
        self, transaction: Callable[[sqlite3.Connection], WriteOutcome]
    ) -> WriteOutcome | None:
        """Run the transaction on this object's own connection, in the event loop's thread:
        four statements of a few microseconds each, where a trip to a driver thread costs
        hundreds. The connection never waits for a lock (busy_timeout 0): when another process
        holds SQLite's write lock, or anything else fails, None (nothing was written; the
        caller goes through the driver's thread, which waits and reports errors). A commit
        that crosses the WAL's auto-checkpoint threshold checkpoints here, as it would in the
        driver's thread: now and then a few milliseconds of the loop."""
        try:
            if self._conn is None:
                conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute("PRAGMA synchronous = NORMAL")  # as the store's (WAL: the file's)
                self._conn = conn
            return transaction(self._conn)
        except sqlite3.Error:
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @classmethod
    def for_database(cls, db: Database) -> ReconcileWrites | None:
        """The compiled writes for a SQLite store; None for PostgreSQL."""
        return cls(db) if db.dialect == "sqlite" else None

    def _node_row(self, record: NodeRecord) -> tuple[Any, ...]:
        values = []
        for name, is_json in self._node_columns:
            value = getattr(record, name)
            if is_json:
                value = _json(value)
            elif isinstance(value, enum.Enum):
                value = value.value
            values.append(value)
        return (*values, record.version + 1, record.execution_id, record.node_id, record.version)

    def _event_row(self, event: EventRecord) -> tuple[Any, ...]:
        return tuple(
            _json(getattr(event, name)) if is_json else getattr(event, name)
            for name, is_json in self._event_columns
        )

    async def write(
        self,
        execution_id: str,
        owner: str,
        lease_until: float,
        nodes: Sequence[NodeRecord],
        events: Sequence[EventRecord],
    ) -> WriteOutcome:
        """Hold the lease, swap every node on its version and append the events, all or
        nothing. On WRITTEN each node's version is bumped, as NodeRepository.update_many."""
        node_rows = [self._node_row(record) for record in nodes]
        event_rows = [self._event_row(event) for event in events]

        def transaction(conn: sqlite3.Connection) -> WriteOutcome:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcome = WriteOutcome.WRITTEN
                if conn.execute(self._hold, (lease_until, execution_id, owner)).rowcount != 1:
                    outcome = WriteOutcome.LEASE_LOST
                elif node_rows and (
                    conn.executemany(self._update_node, node_rows).rowcount != len(node_rows)
                ):
                    outcome = WriteOutcome.NODE_CHANGED
                elif event_rows:
                    conn.executemany(self._insert_event, event_rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT" if outcome is WriteOutcome.WRITTEN else "ROLLBACK")
            return outcome

        async with self._db.writer():
            outcome = self._here(transaction)
        if outcome is not None and self._db.health.down_since is not None:
            self._db.health.ok()  # as any transaction that succeeds
        if outcome is None:  # another process writes now: wait for it in the driver's thread
            outcome = await self._db.run_in_driver(transaction)
        if outcome is WriteOutcome.WRITTEN:
            for record in nodes:
                record.version += 1
        return outcome
