"""Cross-process wake-ups through the store.

A change is published inside the transaction that makes it, so a subscriber never wakes
before the change is visible. PostgreSQL uses NOTIFY/LISTEN on one channel, the logical
channel travelling in the payload, so a subscriber added at any time hears everything
committed after it subscribed. SQLite has no notification channel, so a publish inserts a
row, and once it commits sends a datagram to every process registered beside the database
(`localwake.py`); a process woken so checks `PRAGMA data_version` (a counter that moves when
another connection commits: microseconds, no lock) and reads the new rows. A slow fallback
poll of `data_version` catches what a datagram cannot reach (another host's network
namespace, a platform without the channel: there the poll runs every `poll_interval`).

Subscribers register plain callbacks; they must be quick and never block. When the
notifier may have missed notifications (its PostgreSQL connection dropped and came back),
every callback receives WAKE_ALL and must re-check everything it waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock, SystemClock
from sluice.errors import StoreUnavailableError
from sluice.store import schema
from sluice.store.database import (
    Database,
    after_commit,
    sqlite_data_version_connection,
    translate_error,
)
from sluice.store.localwake import WakeReceiver, WakeSender

log = logging.getLogger(__name__)
Callback = Callable[[str], None]
EXECUTIONS_CHANNEL = "executions"
"""Published on an execution's creation, abort and end; payload: the execution id."""
WAKE_ALL = "*"
"""Payload meaning "notifications may have been lost: re-check everything"."""
_PG_CHANNEL = "sluice"
_SEPARATOR = "\x1f"
_RECONNECT_MAX = 5.0


def pg_notification(channel: str, payload: str) -> tuple[str, str]:
    """The PostgreSQL channel and message that carry `payload` on logical `channel`."""
    return _PG_CHANNEL, f"{channel}{_SEPARATOR}{payload}"


class Notifier:
    """Publish in a transaction; subscribe with a callback per channel."""

    def __init__(
        self,
        db: Database,
        origin: str,
        *,
        clock: Clock | None = None,
        poll_interval: float = 0.02,
        fallback_interval: float = 0.5,
        retention: float = 60.0,
    ) -> None:
        self._db = db
        self._origin = origin
        self._clock = clock or SystemClock()
        self._poll_interval = poll_interval
        self._fallback_interval = max(poll_interval, fallback_interval)
        self._sender: WakeSender | None = None
        self._receiver: WakeReceiver | None = None
        self._woken = asyncio.Event()
        self._retention = retention
        self._callbacks: dict[str, list[Callback]] = {}
        self._task: asyncio.Task[None] | None = None
        self._pg_conn: Any = None

    async def publish(self, conn: AsyncConnection, channel: str, payload: str) -> None:
        """Announce a change to `channel`; delivered to every process once `conn` commits."""
        if self._db.dialect == "postgresql":
            await conn.execute(sa.select(sa.func.pg_notify(*pg_notification(channel, payload))))
            return
        row = {
            "channel": channel,
            "payload": payload,
            "origin": self._origin,
            "created_at": self._clock.now(),
        }
        await conn.execute(sa.insert(schema.notifications).values(**row))
        after_commit(self._wake_local_processes)

    def publish_direct(self, cursor: sqlite3.Cursor, channel: str, payload: str) -> None:
        """`publish` inside a transaction of the direct SQLite path (store/direct.py)."""
        cursor.execute(
            "INSERT INTO notifications (channel, payload, origin, created_at) VALUES (?, ?, ?, ?)",
            (channel, payload, self._origin, self._clock.now()),
        )
        after_commit(self._wake_local_processes)

    def _wake_local_processes(self) -> None:
        """After a commit with notifications: wake the processes sharing the SQLite file."""
        if self._sender is None:
            assert self._db.url.path is not None
            self._sender = WakeSender(self._db.url.path)
        try:
            self._sender.wake_all()
        except OSError:  # a hint only: the fallback poll delivers anyway
            log.debug("local wake-up failed", exc_info=True)

    async def publish_many(
        self, conn: AsyncConnection, channel: str, payloads: Sequence[str]
    ) -> None:
        """`publish` of many payloads in one statement: per-payload statements cost more than
        the decisions a controller publishes them for."""
        if not payloads:
            return
        if self._db.dialect == "postgresql":
            pg_channel = pg_notification(channel, "")[0]
            messages = [pg_notification(channel, payload)[1] for payload in payloads]
            statement = sa.text(
                "SELECT pg_notify(:channel, m) FROM unnest(CAST(:messages AS text[])) m"
            )
            await conn.execute(statement, {"channel": pg_channel, "messages": messages})
            return
        now = self._clock.now()
        rows = [
            {"channel": channel, "payload": p, "origin": self._origin, "created_at": now}
            for p in payloads
        ]
        await conn.execute(sa.insert(schema.notifications), rows)
        after_commit(self._wake_local_processes)

    def deliver_local(self, channel: str, payload: str) -> None:
        """Run this process's callbacks now, without waiting for the round trip."""
        for callback in list(self._callbacks.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("notification callback for %s failed", channel)

    def _wake_everyone(self) -> None:
        for channel in list(self._callbacks):
            self.deliver_local(channel, WAKE_ALL)

    def subscribe(self, channel: str, callback: Callback) -> Callable[[], None]:
        """Call `callback(payload)` on each notification; returns an unsubscribe function."""
        self._callbacks.setdefault(channel, []).append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks[channel].remove(callback)

        return unsubscribe

    async def start(self) -> None:
        """Begin delivering: everything committed after `start` returns is delivered."""
        if self._task is not None:
            return
        if self._db.dialect == "postgresql":
            await self._pg_connect()
            self._task = asyncio.create_task(self._pg_loop(), name="sluice-notifier")
            return
        assert self._db.url.path is not None
        conn = sqlite_data_version_connection(self._db.url.path)
        last_id = conn.execute("SELECT coalesce(max(id), 0) FROM notifications").fetchone()[0]
        self._receiver = WakeReceiver.open(self._db.url.path)
        if self._receiver is not None:
            self._receiver.start(self._woken.set)
        self._task = asyncio.create_task(self._sqlite_loop(conn, last_id), name="sluice-notifier")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None
        if self._sender is not None:
            self._sender.close()
            self._sender = None
        await self._pg_close()

    # SQLite: on a wake-up (or the fallback poll), check data_version, read new rows.
    async def _sqlite_loop(self, conn: Any, last_id: int) -> None:
        """Deliver until cancelled; a failing check reports to the database's health (one
        line per outage) and is retried, never ending delivery."""
        try:
            version = None
            next_purge = self._clock.now() + self._retention / 2
            while True:
                try:
                    current = conn.execute("PRAGMA data_version").fetchone()[0]
                    if current != version:
                        last_id = self._sqlite_drain(conn, last_id)
                        version = current
                except sqlite3.Error as exc:
                    self._db.health.lost(self._unavailable(exc))
                    await asyncio.sleep(_RECONNECT_MAX / 5)
                    continue
                if self._clock.now() >= next_purge:
                    next_purge = self._clock.now() + self._retention / 2
                    await self._purge()
                await self._next_look()
        finally:
            conn.close()

    async def _next_look(self) -> None:
        """Wait for a wake-up from a committing process, or the poll interval without one."""
        interval = self._poll_interval if self._receiver is None else self._fallback_interval
        if not self._woken.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._woken.wait()
        self._woken.clear()

    def _unavailable(self, exc: BaseException) -> StoreUnavailableError:
        error = translate_error(exc, self._db.url)
        if isinstance(error, StoreUnavailableError):
            return error
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreUnavailableError(f"cannot connect to {self._db.url.display}: {text}")

    def _sqlite_drain(self, conn: Any, last_id: int) -> int:
        rows = conn.execute(
            "SELECT id, channel, payload FROM notifications WHERE id > ? ORDER BY id", (last_id,)
        ).fetchall()
        for row_id, channel, payload in rows:
            last_id = row_id
            self.deliver_local(channel, payload)
        return int(last_id)

    async def _purge(self) -> None:
        cutoff = self._clock.now() - self._retention
        try:
            async with self._db.begin() as conn:
                table = schema.notifications
                await conn.execute(sa.delete(table).where(table.c.created_at < cutoff))
        except Exception as exc:
            reraise_cancellation()
            if not self._db.health.expected(exc):
                log.warning("could not purge old notifications", exc_info=True)

    # PostgreSQL: LISTEN on a dedicated autocommit connection; reconnect when it drops.
    async def _pg_connect(self) -> None:
        import psycopg

        dsn = self._db.url.driver_url.replace("postgresql+psycopg://", "postgresql://")
        self._pg_conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await self._pg_conn.execute(f"LISTEN {_PG_CHANNEL}")

    async def _pg_close(self) -> None:
        if self._pg_conn is not None:
            with contextlib.suppress(Exception):
                await self._pg_conn.close()
            self._pg_conn = None

    async def _pg_loop(self) -> None:
        """Listen until cancelled. A dropped connection is an outage of the database: it is
        reported once through the database's health, shared with every other loop."""
        delay = self._poll_interval
        while True:
            try:
                async for note in self._pg_conn.notifies():
                    channel, _, payload = note.payload.partition(_SEPARATOR)
                    self.deliver_local(channel, payload)
            except Exception as exc:  # the connection dropped: reconnect, then wake everyone
                reraise_cancellation()
                self._db.health.lost(self._unavailable(exc))
            await self._pg_close()
            delay = await self._pg_reconnect(delay)
            self._wake_everyone()

    async def _pg_reconnect(self, delay: float) -> float:
        while True:
            await asyncio.sleep(delay)
            try:
                await self._pg_connect()
                return self._poll_interval
            except Exception as exc:
                reraise_cancellation()
                delay = min(_RECONNECT_MAX, delay * 2)
                self._db.health.lost(self._unavailable(exc))
                log.debug("reconnecting for notifications failed (%s)", exc)
