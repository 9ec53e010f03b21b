"""The engine's most frequent write on SQLite, compiled once, on the direct path.

A reconcile that changes only nodes and events (not the execution's phase) writes: its lease
held (UPDATE executions ... WHERE owner AND owner_epoch: the fence), each changed node a
compare-and-swap on its version, and its new events. Through SQLAlchemy's async layer that
is six trips between the event loop and aiosqlite's thread (BEGIN, three statements, COMMIT,
the pool's reset) and the statements built and compiled each time; measured, those trips and
that building were most of a chain step's cost (docs/performance.md). Here the SQL is
written once, from the schema, and the whole transaction runs as one function on the store's
direct sqlite3 path (store/direct.py: the event loop's thread when SQLite's write lock is
free, a worker thread when another process holds it, the same in-process write lock as every
writer). The same statements, the same atomicity; a lease or a version that does not match
rolls the whole transaction back.

PostgreSQL keeps the repository path.
"""

from __future__ import annotations

import enum
import json
import operator
import sqlite3
import time
from collections.abc import Sequence
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


class _Refused(Exception):
    """Raised inside the transaction to roll it back with `outcome`."""

    def __init__(self, outcome: WriteOutcome) -> None:
        super().__init__(outcome.value)
        self.outcome = outcome


class ReconcileWrites:
    """Compiled once per store; `write` runs one reconcile's transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        nodes = schema.node_executions
        self._node_columns = _columns(nodes, (*_KEYS, "version"))
        node_names = [name for name, _ in self._node_columns]
        self._node_values = operator.attrgetter(*node_names)
        sample = NodeRecord("", "")  # its enum fields default to members: they are stored as values
        self._node_json = [i for i, (_, is_json) in enumerate(self._node_columns) if is_json]
        self._node_enums = [
            i for i, name in enumerate(node_names) if isinstance(getattr(sample, name), enum.Enum)
        ]
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
            f"UPDATE {schema.executions.name} SET owner_expires_at = ?"
            " WHERE id = ? AND owner = ? AND owner_epoch = ?"
        )

    @classmethod
    def for_database(cls, db: Database) -> ReconcileWrites | None:
        """The compiled writes for a SQLite store; None for PostgreSQL."""
        return cls(db) if db.dialect == "sqlite" else None

    def _node_row(self, record: NodeRecord) -> tuple[Any, ...]:
        values = list(self._node_values(record))  # every column in one C call
        for i in self._node_json:
            values[i] = _json(values[i])
        for i in self._node_enums:
            if isinstance(values[i], enum.Enum):
                values[i] = values[i].value
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
        epoch: int,
        now: float | None,
        lease: float,
        nodes: Sequence[NodeRecord],
        events: Sequence[EventRecord],
    ) -> WriteOutcome:
        """Hold the lease (the owner in `epoch`, for `lease` more seconds of the host's
        clock, or of `now`, a test clock's), swap every node on its version and append the
        events, all or nothing. On WRITTEN each node's version is bumped, as
        NodeRepository.update_many."""
        node_rows = [self._node_row(record) for record in nodes]
        event_rows = [self._event_row(event) for event in events]

        def transaction(cursor: sqlite3.Cursor) -> None:
            until = (time.time() if now is None else now) + lease  # the host's clock, locked
            hold = (until, execution_id, owner, epoch)
            if cursor.execute(self._hold, hold).rowcount != 1:
                raise _Refused(WriteOutcome.LEASE_LOST)
            if node_rows and (
                cursor.executemany(self._update_node, node_rows).rowcount != len(node_rows)
            ):
                raise _Refused(WriteOutcome.NODE_CHANGED)
            if event_rows:
                cursor.executemany(self._insert_event, event_rows)

        try:
            await self._db.direct().write(transaction)
        except _Refused as refused:  # rolled back: nothing was written
            return refused.outcome
        for record in nodes:
            record.version += 1
        return WriteOutcome.WRITTEN
