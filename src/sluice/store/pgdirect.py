"""A direct psycopg 3 path for the store's hottest PostgreSQL calls.

Through the SQLAlchemy pool, a one-statement transaction costs four round trips (the pool's
pre-ping, BEGIN, the statement, COMMIT) and a greenlet switch per call. `PgDirect` keeps a
few plain autocommit psycopg connections: a single statement is one round trip (its own
transaction), and a short transaction can send BEGIN with its first statement and COMMIT with
its last in one pipeline (`transaction`). psycopg prepares a statement on the server once it
has run a few times on a connection, so the hot statements are parsed and planned once.

A connection that fails is dropped (the next call opens another); the error leaves as the
store's errors, a lost server as StoreUnavailableError (reported to the database's health).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sluice.errors import StoreError, StoreGoneError, StoreUnavailableError
from sluice.store.database import Database

_POOL = 4
_CONNECT_TIMEOUT = 5


class PgDirect:
    """Up to `_POOL` autocommit psycopg connections to the store's PostgreSQL database."""

    def __init__(self, db: Database) -> None:
        if db.dialect != "postgresql":
            raise ValueError(f"the direct psycopg path is for PostgreSQL, not {db.url.display}")
        self._db = db
        self._dsn = db.url.driver_url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._idle: list[Any] = []
        self._slots = asyncio.Semaphore(_POOL)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """An autocommit psycopg AsyncConnection for this block; driver errors leave as the
        store's errors, and a connection that failed is closed instead of reused."""
        import psycopg

        async with self._slots:
            conn = None
            while self._idle and conn is None:
                conn = self._idle.pop()
                conn = None if conn.closed else conn
            try:
                if conn is None:
                    conn = await psycopg.AsyncConnection.connect(
                        self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
                    )
                yield conn
            except (psycopg.Error, OSError) as exc:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                    conn = None
                raise self._translate(exc) from exc
            except BaseException:
                if conn is not None:  # cancelled mid-call: the connection's state is unknown
                    with contextlib.suppress(Exception):
                        await conn.close()
                    conn = None
                raise
            finally:
                if conn is not None:
                    self._idle.append(conn)
        if self._db.health.down_since is not None:
            self._db.health.ok()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection inside BEGIN ... COMMIT (ROLLBACK on an exception). The statements
        are pipelined: BEGIN travels with the first one, COMMIT with the results of the last."""
        from psycopg.pq import TransactionStatus

        async with self.connection() as conn:
            try:
                async with conn.pipeline():
                    await conn.execute("BEGIN")
                    yield conn
                    await conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    try:
                        await conn.execute("ROLLBACK")
                    except Exception:
                        await conn.close()  # not reused: connection() drops a closed one
                raise

    def _translate(self, exc: BaseException) -> StoreError:
        import psycopg

        error = self._db.failed(exc)
        lost = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError)
        if not lost or isinstance(error, StoreUnavailableError | StoreGoneError):
            return error
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        error = StoreUnavailableError(f"cannot connect to {self._db.url.display}: {text}")
        self._db.health.lost(error)
        return error

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()
