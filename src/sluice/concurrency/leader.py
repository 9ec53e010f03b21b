"""The leader lock: at most one live concurrency controller per deployment.

SQLite deployments share one machine, so the lock is an exclusive `flock` on a file next to
the database; PostgreSQL deployments use a session advisory lock held on a dedicated
connection. The operating system drops the first, and the server the second, the moment the
holding process (or its connection) dies, SIGKILL included, so a standby can take over at its
next attempt. The lock decides who leads; the fencing epoch in the store (see
repository.py) makes sure a leader that lost the lock without noticing cannot act.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Any, Protocol

from sluice.store.database import Database

PG_LOCK_KEY = 0x51_1CE_0005  # this deployment's controller, in this database


class LeaderLock(Protocol):
    async def try_acquire(self) -> bool:
        """Take the lock without waiting; True if this holder has it (again)."""
        ...

    async def still_held(self) -> bool:
        """False once the lock may have passed to someone else."""
        ...

    async def release(self) -> None:
        """Give the lock up; idempotent."""
        ...


class FileLeaderLock:
    """`flock` locks belong to an open file description, so two controllers of one process
    exclude each other too (POSIX record locks would not)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    async def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # see store.database
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    async def still_held(self) -> bool:
        """Held unless someone removed the file (a new file would have a new lock)."""
        if self._fd is None:
            return False
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    async def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class PgLeaderLock:
    """A session advisory lock on its own autocommit connection, never returned to a pool."""

    def __init__(self, dsn: str, key: int = PG_LOCK_KEY) -> None:
        self.dsn = dsn
        self.key = key
        self._conn: Any = None

    async def try_acquire(self) -> bool:
        import psycopg

        if self._conn is None:
            self._conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        cursor = await self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def still_held(self) -> bool:
        if self._conn is None:
            return False
        try:
            cursor = await self._conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid = pg_backend_pid() AND objid = %s",
                (self.key & 0xFFFFFFFF,),
            )
            row = await cursor.fetchone()
        except Exception:
            await self.release()
            return False
        return bool(row and row[0])

    async def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()  # closing the session drops its advisory locks
            self._conn = None


def leader_lock_for(db: Database) -> LeaderLock:
    """The lock that fits the deployment's database."""
    if db.dialect == "postgresql":
        dsn = db.url.driver_url.replace("postgresql+psycopg://", "postgresql://")
        return PgLeaderLock(dsn)
    assert db.url.path is not None
    return FileLeaderLock(db.url.path.with_name(db.url.path.name + ".controller.lock"))
