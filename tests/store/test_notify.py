"""Cross-process notifications through the store, on SQLite and PostgreSQL.

Delivery is awaited with a generous timeout; nothing asserts how fast it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sluice.store.database import Database
from sluice.store.notify import Notifier, pg_notification

WAIT = 10.0
TESTS_DIR = str(Path(__file__).resolve().parents[1])


class Inbox:
    """Collects payloads of one channel; `wait_for` returns once a payload has arrived."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, payload: str) -> None:
        self.payloads.append(payload)
        self._changed.set()

    async def wait_for(self, payload: str) -> list[str]:
        async def arrived() -> None:
            while payload not in self.payloads:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(arrived(), WAIT)
        return self.payloads


Pair = tuple[Notifier, Database]


@pytest.fixture
async def open_notifier(store_url: str) -> AsyncIterator[Callable[[str], object]]:
    """Opens independent Database + Notifier pairs on the test database; closes them after."""
    opened: list[Pair] = []

    async def make(origin: str) -> Pair:
        db = await Database.open(store_url, upgrade=True)
        notifier = Notifier(db, origin)
        opened.append((notifier, db))
        return notifier, db

    yield make
    for notifier, db in reversed(opened):
        await notifier.close()
        await db.close()


async def publish(pair: Pair, channel: str, payload: str) -> None:
    notifier, db = pair
    async with db.begin() as conn:
        await notifier.publish(conn, channel, payload)


async def test_a_committed_publish_reaches_another_instance(open_notifier) -> None:  # type: ignore[no-untyped-def]
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    inbox = Inbox()
    subscriber.subscribe("executions", inbox)
    await subscriber.start()
    await publish(publisher, "executions", "e-1")
    await publish(publisher, "executions", "e-2")
    assert await inbox.wait_for("e-2") == ["e-1", "e-2"]


async def test_channels_are_separate(open_notifier) -> None:  # type: ignore[no-untyped-def]
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    executions, other = Inbox(), Inbox()
    subscriber.subscribe("executions", executions)
    subscriber.subscribe("other", other)
    await subscriber.start()
    await publish(publisher, "other", "not-for-executions")
    await publish(publisher, "executions", "e-1")
    assert await executions.wait_for("e-1") == ["e-1"]
    assert await other.wait_for("not-for-executions") == ["not-for-executions"]


async def test_a_rolled_back_transaction_publishes_nothing(open_notifier) -> None:  # type: ignore[no-untyped-def]
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    inbox = Inbox()
    subscriber.subscribe("executions", inbox)
    await subscriber.start()
    notifier, db = publisher

    class Rollback(Exception):
        pass

    with contextlib.suppress(Rollback):
        async with db.begin() as conn:
            await notifier.publish(conn, "executions", "rolled-back")
            raise Rollback
    await publish(publisher, "executions", "marker")  # committed after the rolled-back one
    assert await inbox.wait_for("marker") == ["marker"]


async def test_unsubscribe_stops_delivery(open_notifier) -> None:  # type: ignore[no-untyped-def]
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    dropped, kept = Inbox(), Inbox()
    unsubscribe = subscriber.subscribe("executions", dropped)  # registered first: called first
    subscriber.subscribe("executions", kept)
    await subscriber.start()
    await publish(publisher, "executions", "before")
    await dropped.wait_for("before")
    await kept.wait_for("before")
    unsubscribe()
    unsubscribe()  # idempotent
    await publish(publisher, "executions", "after")
    assert await kept.wait_for("after") == ["before", "after"]
    assert dropped.payloads == ["before"]


async def test_a_failing_callback_does_not_stop_the_others(open_notifier) -> None:  # type: ignore[no-untyped-def]
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")

    def broken(payload: str) -> None:
        raise RuntimeError("callback bug")

    inbox = Inbox()
    subscriber.subscribe("executions", broken)
    subscriber.subscribe("executions", inbox)
    await subscriber.start()
    await publish(publisher, "executions", "one")
    await publish(publisher, "executions", "two")
    assert await inbox.wait_for("two") == ["one", "two"]


async def test_subscribing_after_start_receives_what_is_committed_next(
    open_notifier,  # type: ignore[no-untyped-def]
    store_url: str,
) -> None:
    """The engine and the resource backend subscribe after the notifier started. A change
    committed by another process right after `subscribe` returns must still be delivered: a
    lost wake-up leaves a waiter idle until the resync timer (DESIGN.md section 10.9)."""
    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    warm_up = Inbox()
    subscriber.subscribe("warm-up", warm_up)
    await subscriber.start()
    await publish(publisher, "warm-up", "running")
    await warm_up.wait_for("running")  # the notifier is up and delivering
    inbox = Inbox()
    subscriber.subscribe("late", inbox)
    # Another process commits right away: modelled by a blocking publish on a plain driver
    # connection, before this event loop runs anything else.
    _publish_blocking(store_url, "late", "right-after-subscribe")
    assert await inbox.wait_for("right-after-subscribe") == ["right-after-subscribe"]


async def test_a_change_committed_right_after_start_is_delivered(
    open_notifier,  # type: ignore[no-untyped-def]
    store_url: str,
) -> None:
    """Subscribed before `start()`: once `await start()` returns, every change committed
    afterwards must reach the callbacks."""
    subscriber, _ = await open_notifier("subscriber")
    inbox = Inbox()
    subscriber.subscribe("early", inbox)
    await subscriber.start()
    _publish_blocking(store_url, "early", "right-after-start")
    assert await inbox.wait_for("right-after-start") == ["right-after-start"]


def _publish_blocking(url: str, channel: str, payload: str) -> None:
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.split(":///", 1)[1]) as conn:
            conn.execute(
                "INSERT INTO notifications (channel, payload, origin, created_at) "
                "VALUES (?, ?, 'blocking', 0)",
                (channel, payload),
            )
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", pg_notification(channel, payload))


async def test_deliver_local_runs_this_process_callbacks_at_once(open_notifier) -> None:  # type: ignore[no-untyped-def]
    notifier, _ = await open_notifier("local")
    inbox = Inbox()
    notifier.subscribe("executions", inbox)
    notifier.deliver_local("executions", "now")
    notifier.deliver_local("elsewhere", "ignored")
    assert inbox.payloads == ["now"]


async def test_a_publish_from_another_process_is_delivered(
    open_notifier,  # type: ignore[no-untyped-def]
    store_url: str,
) -> None:
    subscriber, _ = await open_notifier("subscriber")
    inbox = Inbox()
    subscriber.subscribe("executions", inbox)
    await subscriber.start()
    sys.path.insert(0, TESTS_DIR)  # the spawned child copies sys.path and imports the worker
    try:
        worker = importlib.import_module("support.foundation_workers")
        process = multiprocessing.get_context("spawn").Process(
            target=worker.publish, args=(store_url, "executions", "from-another-process")
        )
        process.start()
    finally:
        sys.path.remove(TESTS_DIR)
    await asyncio.to_thread(process.join, 60)
    assert process.exitcode == 0
    assert await inbox.wait_for("from-another-process") == ["from-another-process"]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # SQLite has no connection
async def test_notifications_keep_flowing_after_the_listening_connection_drops(
    open_notifier,  # type: ignore[no-untyped-def]
    store_url: str,
) -> None:
    """A database restart or a proxy closing an idle connection must not silence the notifier
    for the rest of the process's life."""
    import psycopg

    subscriber, _ = await open_notifier("subscriber")
    publisher = await open_notifier("publisher")
    inbox = Inbox()
    subscriber.subscribe("executions", inbox)
    await subscriber.start()
    await publish(publisher, "executions", "before")
    await inbox.wait_for("before")
    with psycopg.connect(store_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND query ILIKE 'LISTEN%'"
        ).fetchall()
    assert killed, "the LISTEN connection was not found"
    for attempt in range(50):  # keep publishing: a reconnecting notifier gets one of them
        await publish(publisher, "executions", f"after-{attempt}")
        if any(p.startswith("after-") for p in inbox.payloads):
            break
        await asyncio.sleep(0.2)
    assert any(p.startswith("after-") for p in inbox.payloads), inbox.payloads
