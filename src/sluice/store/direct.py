"""A direct sqlite3 path for the store's hottest short transactions.

Through SQLAlchemy's asyncio layer every SQLite call (execute, fetch, close, commit) is a hop
to aiosqlite's thread and back: about 70 hops for a resource allocate+release pair, which
cost far more than the statements (docs/performance.md). A transaction of a few
single-row statements takes tens of microseconds in SQLite itself, less than one such hop, so
`SqliteDirect` runs it on the event loop's thread, on a connection of its own:

- in-process writers still queue on the Database's asyncio write lock (shared with the
  SQLAlchemy path), so the loop never blocks on another task of this process;
- the connection's busy timeout is 0 on the loop's thread: when another process holds the
  file's write lock, BEGIN fails at once, and the transaction is run again in a worker
  thread with the normal busy timeout, so the loop never waits for another process either;
- after COMMIT, the hooks registered in the transaction run (the notifier's local wake-up);
- this connection never checkpoints on commit (`wal_autocheckpoint = 0`): a checkpoint syncs
  the WAL and the database file, milliseconds that would stall the loop every few hundred
  commits. Every `_CHECKPOINT_EVERY` commits a PASSIVE checkpoint runs in a worker thread
  instead, on a connection of its own (other connections still checkpoint as they commit).

Only for transactions that do no I/O but SQLite's and that are short: the work function is
synchronous and must not await.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sluice.store.database import COMMIT_HOOKS, Database

log = logging.getLogger(__name__)
T = TypeVar("T")
_CHECKPOINT_EVERY = 256
"""Direct write commits between two background checkpoints (a few pages each: about
SQLite's default of a checkpoint per 1000 WAL pages)."""
Work = Callable[[sqlite3.Cursor], T]


class SqliteDirect:
    """One plain sqlite3 connection to the store's file, used under the Database's write lock."""

    def __init__(self, db: Database) -> None:
        if db.dialect != "sqlite" or db.url.path is None:
            raise ValueError(f"the direct path is for SQLite files, not {db.url.display}")
        self._db = db
        self._path: Path = db.url.path
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()  # the connection's own, for read transactions
        self._commits = 0
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpoint: asyncio.Task[None] | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(str(self._path), isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous = NORMAL")  # the file is WAL already (Database.open)
            conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._conn = conn
        return self._conn

    async def write(self, work: Work[T]) -> T:
        """Run `work` in a BEGIN IMMEDIATE transaction and commit it; the hooks registered
        with `database.after_commit` during `work` run once it is committed."""
        if self._db.write_lock is None:  # pragma: no cover - SQLite always has one
            raise RuntimeError("a SQLite database without its write lock")
        async with self._db.write_lock, self._lock:
            hooks: list[Callable[[], None]] = []
            result = await self._run(work, "BEGIN IMMEDIATE", hooks)
        for hook in hooks:
            hook()
        self._commits += 1
        if self._commits >= _CHECKPOINT_EVERY and self._checkpoint is None:
            self._commits = 0
            self._checkpoint = asyncio.create_task(self._checkpoint_in_thread())
        return result

    async def _checkpoint_in_thread(self) -> None:
        try:
            await asyncio.to_thread(self._checkpoint_now)
        except sqlite3.Error as exc:  # the next one retries; a lost file shows elsewhere
            log.debug("background checkpoint of %s failed: %s", self._path, exc)
        finally:
            self._checkpoint = None

    def _checkpoint_now(self) -> None:
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(
                str(self._path), isolation_level=None, check_same_thread=False
            )
        self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def read(self, work: Work[T]) -> T:
        """Run `work` in a read transaction (a snapshot; takes no write lock)."""
        async with self._lock:
            return await self._run(work, "BEGIN", None)

    async def _run(self, work: Work[T], begin: str, hooks: list[Callable[[], None]] | None) -> T:
        try:
            conn = self._connection()
            try:
                result = self._transaction(conn, work, begin, hooks)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                # Another process holds the file: wait for it in a thread, not on the loop.
                result = await self._in_thread(conn, work, begin, hooks)
        except sqlite3.Error as exc:
            raise self._db.failed(exc) from exc
        if self._db.health.down_since is not None:
            self._db.health.ok()
        return result

    async def _in_thread(
        self,
        conn: sqlite3.Connection,
        work: Work[T],
        begin: str,
        hooks: list[Callable[[], None]] | None,
    ) -> T:
        """`_patient` in a worker thread. Cancelled, it still waits for the thread to finish
        before the caller releases the locks: the connection is never used by two threads at
        once (the transaction may then commit with nobody told, as a lost answer would)."""
        running = asyncio.ensure_future(asyncio.to_thread(self._patient, conn, work, begin, hooks))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            while not running.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([running])
            if not running.cancelled() and running.exception() is None and hooks is not None:
                for hook in hooks:  # committed: wake the other processes all the same
                    hook()
                hooks.clear()
            raise

    def _patient(
        self,
        conn: sqlite3.Connection,
        work: Work[T],
        begin: str,
        hooks: list[Callable[[], None]] | None,
    ) -> T:
        conn.execute(f"PRAGMA busy_timeout = {int(self._db.busy_timeout * 1000)}")
        try:
            return self._transaction(conn, work, begin, hooks)
        finally:
            conn.execute("PRAGMA busy_timeout = 0")

    @staticmethod
    def _transaction(
        conn: sqlite3.Connection,
        work: Work[T],
        begin: str,
        hooks: list[Callable[[], None]] | None,
    ) -> T:
        conn.execute(begin)
        token = COMMIT_HOOKS.set(hooks)
        try:
            cursor = conn.cursor()
            result = work(cursor)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if hooks is not None:
                hooks.clear()
            raise
        finally:
            COMMIT_HOOKS.reset(token)

    async def close(self) -> None:
        if self._checkpoint is not None:
            with contextlib.suppress(Exception):
                await self._checkpoint
        for conn in (self._conn, self._checkpointer):
            if conn is not None:
                conn.close()
        self._conn = self._checkpointer = None


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text
