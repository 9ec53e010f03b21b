"""The SQLite direct path and the local wake-up channel beside the database.

- a notification committed by another process reaches a notifier whose fallback poll would
  take far longer than the test waits: only the datagram channel can have delivered it;
- the registration of a SIGKILLed process is forgotten by the next sender, and the living
  still get their wake-ups;
- the commits of one turn of the event loop send a wake-up at once and one more when the
  task yields, not one each, and a sender closed before that sends what it owes;
- SIGKILL in the middle of a stream of direct-path allocations and releases leaves every
  usage counter equal to the units its holders hold: each operation commits whole or not
  at all (one BEGIN IMMEDIATE ... COMMIT), whichever statement the kill lands on;
- a direct write that meets another process's write lock waits for it off the event loop.

Delivery is awaited with a generous timeout; nothing asserts how fast it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.store.database import Database
from sluice.store.localwake import WakeReceiver, WakeSender, wake_dir
from sluice.store.notify import Notifier

WAIT = 10.0
LONG_POLL = 600.0  # a fallback poll the tests never see
TESTS_DIR = str(Path(__file__).resolve().parents[1])


def spawn(name: str, *args: Any) -> Any:
    """Start a spawned process running `support.direct_workers.<name>(*args)`."""
    sys.path.insert(0, TESTS_DIR)  # the spawned child copies sys.path and imports the worker
    try:
        worker = importlib.import_module("support.direct_workers")
        process = multiprocessing.get_context("spawn").Process(
            target=getattr(worker, name), args=args
        )
        process.start()
    finally:
        sys.path.remove(TESTS_DIR)
    return process


async def test_another_processs_commit_wakes_a_notifier_without_its_poll(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    db = await Database.open(url)
    notifier = Notifier(db, "parent", poll_interval=LONG_POLL, fallback_interval=LONG_POLL)
    got: asyncio.Queue[str] = asyncio.Queue()
    notifier.subscribe("test", got.put_nowait)
    await notifier.start()
    try:
        await asyncio.sleep(0.1)  # the loop has looked once and now waits
        child = spawn("publish", url, "hi")
        await asyncio.to_thread(child.join, 60)
        assert child.exitcode == 0
        assert await asyncio.wait_for(got.get(), WAIT) == "hi"
    finally:
        await notifier.close()
        await db.close()


async def test_a_killed_processs_registration_is_forgotten_and_the_living_still_hear(
    tmp_path: Path,
) -> None:
    database = tmp_path / "sluice.db"
    database.touch()
    ready = multiprocessing.get_context("spawn").Queue()
    child = spawn("register_and_hang", str(database), ready)
    try:
        assert ready.get(timeout=60) is True
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(10)
    dead = os.listdir(wake_dir(database))
    assert len(dead) == 1 and dead[0].startswith(f"{child.pid}-")

    receiver = WakeReceiver.open(database)
    assert receiver is not None
    woken = asyncio.Event()
    receiver.start(woken.set)
    sender = WakeSender(database)
    try:
        sender.wake_all()
        await asyncio.wait_for(woken.wait(), WAIT)
        assert dead[0] not in os.listdir(wake_dir(database))
        assert len(os.listdir(wake_dir(database))) == 1  # the living one
    finally:
        sender.close()
        receiver.close()
    assert os.listdir(wake_dir(database)) == []


async def test_the_commits_of_one_loop_turn_send_two_wake_ups_not_one_each(
    tmp_path: Path,
) -> None:
    database = tmp_path / "sluice.db"
    database.touch()
    receiver = WakeReceiver.open(database)
    assert receiver is not None
    sock = receiver._sock  # read here, datagram by datagram, instead of receiver.start()

    def received() -> int:
        count = 0
        with contextlib.suppress(BlockingIOError):
            while sock.recv(64):
                count += 1
        return count

    sender = WakeSender(database)
    try:
        for _ in range(3):  # three commits in one turn of the loop
            sender.wake_all()
        assert received() == 1  # the first one's at once: no delay on a hand-off
        await asyncio.sleep(0)  # the task yields: the turn ends
        assert received() == 1  # one for the two after it
        await asyncio.sleep(0)
        assert received() == 0

        sender.wake_all()
        sender.wake_all()
        sender.close()  # before the turn ends: close sends what is owed
        assert received() == 2
    finally:
        receiver.close()


def _counters_match_holders(path: Path) -> None:
    conn = sqlite3.connect(str(path))
    try:
        held = conn.execute(
            "SELECT namespace, sum(units) FROM resource_holders GROUP BY namespace"
        ).fetchall()
        counted = conn.execute(
            "SELECT namespace, in_use FROM resource_usage WHERE project = '' AND domain = ''"
        ).fetchall()
        by_domain = conn.execute(
            "SELECT namespace, in_use FROM resource_usage WHERE project = 'p' AND domain = 'd'"
        ).fetchall()
    finally:
        conn.close()
    # A namespace with a stored quota keeps its counters at zero once nothing is held there.
    assert {ns: n for ns, n in counted if n != 0} == dict(held)
    assert {ns: n for ns, n in by_domain if n != 0} == dict(held)


@pytest.mark.parametrize("after", [0.3, 0.7, 1.1])
def test_sigkill_during_direct_allocations_leaves_counters_equal_to_holders(
    tmp_path: Path, after: float
) -> None:
    path = tmp_path / "sluice.db"
    url = f"sqlite:///{path}"
    asyncio.run(_open_and_close(url))
    started = multiprocessing.get_context("spawn").Queue()
    child = spawn("churn", url, started)
    try:
        started.get(timeout=60)
        time.sleep(after)
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(10)
    _counters_match_holders(path)
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("SELECT count(*) FROM resource_holders").fetchone()[0] > 0
    finally:
        conn.close()


async def _open_and_close(url: str) -> None:
    db = await Database.open(url)
    await db.close()


async def test_a_direct_write_waits_for_another_processs_lock_off_the_loop(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    db = await Database.open(url)
    other = sqlite3.connect(str(tmp_path / "sluice.db"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # as another process would hold the write lock
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        write = asyncio.create_task(
            db.direct().write(lambda cur: cur.execute("DELETE FROM notifications").rowcount)
        )
        await asyncio.sleep(0.3)
        assert not write.done()  # it waits for the lock...
        assert ticks > 5  # ...and the loop runs meanwhile
        other.execute("COMMIT")
        assert await asyncio.wait_for(write, WAIT) == 0
        ticker.cancel()
    finally:
        other.close()
        await db.close()


async def test_a_direct_write_cancelled_while_it_waits_keeps_the_connection_usable(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    db = await Database.open(url)
    other = sqlite3.connect(str(tmp_path / "sluice.db"), isolation_level=None)
    insert = "INSERT INTO notifications (channel, payload, origin, created_at) VALUES (?, ?, ?, ?)"
    try:
        other.execute("BEGIN IMMEDIATE")
        waiting = asyncio.create_task(
            db.direct().write(lambda cur: cur.execute(insert, ("c", "late", "o", 0.0)).rowcount)
        )
        await asyncio.sleep(0.2)
        waiting.cancel()
        await asyncio.sleep(0.1)
        assert not waiting.done()  # it waits for its thread, which still holds the connection
        other.execute("COMMIT")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, WAIT)
        rows = await db.direct().write(
            lambda cur: cur.execute("SELECT payload FROM notifications").fetchall()
        )
        assert rows == [("late",)]  # committed, though its caller was gone
    finally:
        other.close()
        await db.close()
