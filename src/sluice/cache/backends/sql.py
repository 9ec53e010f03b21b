"""The SQL backend on the store's database (SQLite embedded, PostgreSQL distributed).

Each primitive is one statement in its own transaction (SQLAlchemy Core, the same text on
both dialects but for `INSERT ... ON CONFLICT`). A stored entry or a deleted reservation
publishes its key on the notifier in that same transaction, so a waiter in any process wakes
only once the change is visible to it.

Clock authority: on PostgreSQL, `now()` is the server's clock, the one clock every engine on
every machine shares; on SQLite, every process sharing the file is on one machine, so it is
that machine's clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from sluice.cache.base import (
    CACHE_CHANNEL,
    CatalogRepository,
    Claimed,
    EntryRepository,
    ReservationRepository,
)
from sluice.cache.models import CacheEntry, CacheSource, EntryInfo, Reservation
from sluice.clock import SystemClock
from sluice.store import schema
from sluice.store.database import Database
from sluice.store.notify import Notifier

_R = schema.cache_reservations
_E = schema.cache_entries
# Without it SQLAlchemy reports rowcount -1 for an INSERT on psycopg, hiding ON CONFLICT.
_COUNT_ROWS = {"preserve_rowcount": True}
_SERVER_NOW = sa.select(sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Double))


class _Statements:
    """Runs one statement per transaction; publishes wake-ups for changed keys inside it."""

    def __init__(self, db: Database, notifier: Notifier | None) -> None:
        self.db = db
        self._notifier = notifier
        self.insert: Callable[[sa.Table], Any] = sqlite.insert
        if db.dialect == "postgresql":  # imported here: a SQLite store never loads it
            from sqlalchemy.dialects import postgresql

            self.insert = postgresql.insert

    async def write(self, statement: Any, *, wake: str | None = None) -> int:
        """Execute; returns the rows changed, and wakes `wake`'s waiters if there were any."""
        async with self.db.begin() as conn:
            result = await conn.execute(statement, execution_options=_COUNT_ROWS)
            changed = max(result.rowcount or 0, 0)
            if changed and wake is not None and self._notifier is not None:
                await self._notifier.publish(conn, CACHE_CHANNEL, wake)
        return changed

    async def delete_returning_keys(self, statement: Any) -> list[str]:
        """Execute a DELETE ... RETURNING key; wakes the waiters of every deleted key."""
        async with self.db.begin() as conn:
            keys = sorted(str(key) for key in (await conn.execute(statement)).scalars())
            if self._notifier is not None:
                for key in keys:
                    await self._notifier.publish(conn, CACHE_CHANNEL, key)
        return keys

    async def rows(self, statement: Any) -> list[sa.Row[Any]]:
        async with self.db.read() as conn:
            return list(await conn.execute(statement))


def _reservation(row: sa.Row[Any]) -> Reservation:
    return Reservation(row.key, row.owner_id, row.heartbeat_seconds, row.expires_at)


class SqlReservations(ReservationRepository):
    def __init__(self, statements: _Statements) -> None:
        self._sql = statements

    async def get(self, key: str) -> Reservation | None:
        rows = await self._sql.rows(sa.select(_R).where(_R.c.key == key))
        return _reservation(rows[0]) if rows else None

    async def create(self, reservation: Reservation, now: float) -> bool:
        values = {**_reservation_values(reservation), "created_at": now, "updated_at": now}
        return (
            await self._sql.write(self._sql.insert(_R).values(values).on_conflict_do_nothing()) == 1
        )

    async def update_if_expired_or_owned(
        self, reservation: Reservation, now: float, succeeds: str | None = None
    ) -> bool:
        owned = _R.c.owner_id == reservation.owner_id
        taken_over = _R.c.owner_id == succeeds if succeeds is not None else sa.false()
        statement = (
            sa.update(_R)
            .where(_R.c.key == reservation.key, sa.or_(_R.c.expires_at <= now, owned, taken_over))
            # created_at is when the current owner first acquired it: kept on extension.
            .values(
                **_reservation_values(reservation),
                updated_at=now,
                created_at=sa.case((owned, _R.c.created_at), else_=now),
            )
        )
        return await self._sql.write(statement) == 1

    async def delete_by_key_and_owner(self, key: str, owner_id: str) -> bool:
        statement = sa.delete(_R).where(_R.c.key == key, _R.c.owner_id == owner_id)
        return await self._sql.write(statement, wake=key) == 1

    async def delete_expired(self, now: float) -> list[str]:
        statement = sa.delete(_R).where(_R.c.expires_at <= now).returning(_R.c.key)
        return await self._sql.delete_returning_keys(statement)

    async def list_all(self) -> list[Reservation]:
        return [_reservation(row) for row in await self._sql.rows(sa.select(_R).order_by(_R.c.key))]


def _reservation_values(reservation: Reservation) -> dict[str, Any]:
    return {
        "key": reservation.key,
        "owner_id": reservation.owner_id,
        "heartbeat_seconds": reservation.heartbeat_interval,
        "expires_at": reservation.expires_at,
    }


def _entry_values(key: str, entry: CacheEntry) -> dict[str, Any]:
    return {
        "key": key,
        "task_name": entry.task_name,
        "cache_version": entry.cache_version,
        "outputs": entry.outputs,
        "created_at": entry.created_at,
        "execution_id": entry.source.execution_id,
        "node_id": entry.source.node_id,
    }


def _source(row: sa.Row[Any]) -> CacheSource:
    return CacheSource(row.execution_id, row.node_id)


_INFO_COLUMNS = [c for c in _E.c if c.name != "outputs"]


class SqlEntries(EntryRepository):
    def __init__(self, statements: _Statements) -> None:
        self._sql = statements

    async def get(self, key: str) -> CacheEntry | None:
        rows = await self._sql.rows(sa.select(_E).where(_E.c.key == key))
        if not rows:
            return None
        row = rows[0]
        return CacheEntry(
            row.outputs, row.task_name, row.cache_version, _source(row), row.created_at
        )

    async def insert(self, key: str, entry: CacheEntry) -> bool:
        statement = self._sql.insert(_E).values(_entry_values(key, entry)).on_conflict_do_nothing()
        return await self._sql.write(statement, wake=key) == 1

    async def replace(
        self, key: str, entry: CacheEntry, *, created_before: float | None = None
    ) -> bool:
        values = _entry_values(key, entry)
        statement = (
            self._sql.insert(_E)
            .values(values)
            .on_conflict_do_update(
                index_elements=[_E.c.key],
                set_={name: value for name, value in values.items() if name != "key"},
                where=None if created_before is None else _E.c.created_at < created_before,
            )
        )
        return await self._sql.write(statement, wake=key) == 1

    async def list_all(
        self, *, task_name: str | None = None, limit: int | None = None
    ) -> list[EntryInfo]:
        query = sa.select(*_INFO_COLUMNS).order_by(_E.c.created_at.desc(), _E.c.key).limit(limit)
        if task_name is not None:
            query = query.where(_E.c.task_name == task_name)
        return [
            EntryInfo(row.key, row.task_name, row.cache_version, row.created_at, _source(row))
            for row in await self._sql.rows(query)
        ]

    async def delete(self, keys: Collection[str] = (), *, task_name: str | None = None) -> int:
        matches: list[sa.ColumnElement[bool]] = [_E.c.key.in_(list(keys))] if keys else []
        if task_name is not None:
            matches.append(_E.c.task_name == task_name)
        if not matches:
            return 0
        return await self._sql.write(sa.delete(_E).where(sa.or_(*matches)))


def _sqlite_claim(
    cursor: sqlite3.Cursor, wanted: Reservation, now: float, succeeds: str | None
) -> Claimed:
    row = cursor.execute(
        "SELECT owner_id, heartbeat_seconds, expires_at FROM cache_reservations WHERE key = ?",
        (wanted.key,),
    ).fetchone()
    if row is not None and row[0] not in (wanted.owner_id, succeeds) and row[2] > now:
        return Claimed(Reservation(wanted.key, row[0], row[1], row[2]), "elsewhere")
    cursor.execute(_SQLITE_CLAIM, (*_reservation_values(wanted).values(), now, now))
    owned = row is not None and row[0] == wanted.owner_id
    return Claimed(wanted, "extended" if owned else "acquired")


# created_at is when the current owner first acquired it: kept on extension.
_SQLITE_CLAIM = """
INSERT INTO cache_reservations
    (key, owner_id, heartbeat_seconds, expires_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    owner_id = excluded.owner_id,
    heartbeat_seconds = excluded.heartbeat_seconds,
    expires_at = excluded.expires_at,
    updated_at = excluded.updated_at,
    created_at = CASE WHEN cache_reservations.owner_id = excluded.owner_id
        THEN cache_reservations.created_at ELSE excluded.created_at END
"""
# The upsert writes only over an expired row or the owner's own; otherwise the row as the
# statement found it is returned as "elsewhere". No row at all: a concurrent claim committed
# after this statement's snapshot (the caller tries again).
_PG_CLAIM = """
WITH clock AS (
    SELECT COALESCE(
        %(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision
    ) AS t
), old AS (
    SELECT owner_id, heartbeat_seconds, expires_at FROM cache_reservations WHERE key = %(key)s
), up AS (
    INSERT INTO cache_reservations AS r
        (key, owner_id, heartbeat_seconds, expires_at, created_at, updated_at)
    SELECT %(key)s, %(owner)s, %(heartbeat)s, t + %(span)s, t, t FROM clock
    ON CONFLICT (key) DO UPDATE SET
        owner_id = EXCLUDED.owner_id,
        heartbeat_seconds = EXCLUDED.heartbeat_seconds,
        expires_at = EXCLUDED.expires_at,
        updated_at = EXCLUDED.updated_at,
        created_at = CASE WHEN r.owner_id = EXCLUDED.owner_id
            THEN r.created_at ELSE EXCLUDED.created_at END
    WHERE r.expires_at <= EXCLUDED.updated_at OR r.owner_id = EXCLUDED.owner_id
        OR r.owner_id = %(succeeds)s
    RETURNING r.owner_id, r.heartbeat_seconds, r.expires_at
)
SELECT owner_id, heartbeat_seconds, expires_at,
    CASE WHEN EXISTS (SELECT 1 FROM old WHERE old.owner_id = up.owner_id)
        THEN 'extended' ELSE 'acquired' END
FROM up
UNION ALL
SELECT owner_id, heartbeat_seconds, expires_at, 'elsewhere' FROM old
WHERE NOT EXISTS (SELECT 1 FROM up)
    AND owner_id <> %(owner)s AND owner_id IS DISTINCT FROM %(succeeds)s
    AND expires_at > (SELECT t FROM clock)
"""


class SqlRepository(CatalogRepository):
    """The catalog on `db`; `owns_database` makes `close()` close it too."""

    def __init__(
        self, db: Database, *, notifier: Notifier | None = None, owns_database: bool = False
    ) -> None:
        statements = _Statements(db, notifier)
        self.entries = SqlEntries(statements)
        self.reservations = SqlReservations(statements)
        self._db = db
        self._owns_database = owns_database
        self._system_clock = SystemClock()

    async def claim_reservation(
        self,
        key: str,
        owner_id: str,
        heartbeat: float,
        span: float,
        now: float | None,
        succeeds: str | None = None,
    ) -> Claimed | None:
        """One transaction: on SQLite the direct path's (a read and an upsert under the write
        lock), on PostgreSQL one statement (the server's clock when `now` is None)."""
        if self._db.dialect == "postgresql":
            params = {
                "key": key,
                "owner": owner_id,
                "heartbeat": heartbeat,
                "span": span,
                "succeeds": succeeds,
            }
            async with self._db.pg_direct().connection() as conn:
                cursor = await conn.execute(_PG_CLAIM, {**params, "now": now})
                row = await cursor.fetchone()
            if row is None:
                return None
            return Claimed(Reservation(key, row[0], row[1], row[2]), row[3])
        at = self._system_clock.now() if now is None else now
        wanted = Reservation(key, owner_id, heartbeat, at + span)
        return await self._db.direct().write(
            lambda cursor: _sqlite_claim(cursor, wanted, at, succeeds)
        )

    async def now(self) -> float:
        if self._db.dialect != "postgresql":
            return self._system_clock.now()
        async with self._db.read() as conn:
            return float((await conn.execute(_SERVER_NOW)).scalar_one())

    async def close(self) -> None:
        if self._owns_database:
            await self._db.close()
