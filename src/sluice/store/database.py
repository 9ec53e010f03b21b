"""Opening the database: URL to engine, SQLite pragmas, write transactions, error translation.

SQLite (embedded) runs in WAL mode; every write transaction is `BEGIN IMMEDIATE`, so two
processes never deadlock upgrading a read lock, and writes inside one process are serialised
by an asyncio lock instead of SQLite's sleeping busy handler. A new or old SQLite file is
created and upgraded on open (inside `existing_database_only()` a missing file is an error
instead: read-only commands never create one); PostgreSQL is upgraded by `sluice db upgrade`
(or `upgrade=True`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from sluice.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    NotADatabaseError,
    NotFoundError,
    StoreError,
    StoreGoneError,
    StoreUnavailableError,
)
from sluice.store.health import StoreHealth

if TYPE_CHECKING:
    from sluice.store.direct import SqliteDirect
    from sluice.store.pgdirect import PgDirect

_READ_ONLY = "sluice_read_only"
_MAY_CREATE: ContextVar[bool] = ContextVar("sluice_may_create_database", default=True)
COMMIT_HOOKS: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "sluice_commit_hooks", default=None
)
"""The hooks of the write transaction in progress (see `after_commit`)."""


def after_commit(hook: Callable[[], None]) -> bool:
    """Run `hook` once the write transaction in progress (`Database.begin` or the direct
    path's `write`) commits; it is dropped if the transaction fails. Returns False, with
    nothing registered, outside a write transaction. A hook must be quick and not raise."""
    hooks = COMMIT_HOOKS.get()
    if hooks is None:
        return False
    if hook not in hooks:
        hooks.append(hook)
    return True


@contextlib.contextmanager
def existing_database_only() -> Iterator[None]:
    """Within this block (and tasks started in it), opening a SQLite file that does not exist
    raises NotFoundError instead of creating it and its directories: for read-only commands,
    where a mistyped path would otherwise show an empty, new database."""
    token = _MAY_CREATE.set(False)
    try:
        yield
    finally:
        _MAY_CREATE.reset(token)


@dataclass(frozen=True)
class DatabaseURL:
    """A user's database URL and the SQLAlchemy URL it maps to."""

    raw: str
    dialect: str  # "sqlite" or "postgresql"
    driver_url: str
    sync_url: str
    path: Path | None = None

    @property
    def display(self) -> str:
        """The URL with any password hidden."""
        return (
            make_url(self.driver_url)
            .render_as_string(hide_password=True)
            .replace("+aiosqlite", "")
            .replace("+psycopg", "")
        )


def parse_database_url(url: str) -> DatabaseURL:
    """Map `sqlite:///path`, a plain file path (SQLite: `./x.db`, `/tmp/x.db`, `dir/x.db`; a
    bare word such as `x.db` is refused as a likely mistyped URL) and `postgresql://...` to
    drivers; anything else is an error."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("sqlite", "sqlite+aiosqlite") or (not scheme and "/" in url):
        path_text = url if not scheme else (url.split(":///", 1)[1] if ":///" in url else "")
        if not path_text or path_text == ":memory:":
            raise InvalidArgumentError(
                f"database URL {url!r} has no file path; use sqlite:///path/to/sluice.db"
            )
        path = Path(path_text)
        return DatabaseURL(url, "sqlite", f"sqlite+aiosqlite:///{path}", f"sqlite:///{path}", path)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        rest = url.split("://", 1)[1]
        return DatabaseURL(
            url, "postgresql", f"postgresql+psycopg://{rest}", f"postgresql+psycopg://{rest}"
        )
    raise InvalidArgumentError(
        f"unknown database URL scheme {scheme!r} in {url!r}; use sqlite:///path, a path "
        "such as ./x.db, or postgresql://..."
    )


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "PostgreSQL needs the psycopg driver: pip install 'sluice[postgres]'"
        ) from None


_BUSY_TIMEOUT = 30.0
"""Seconds SQLite waits for a lock before giving up."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see _sqlite_begin)
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
    _use_wal(cursor)
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _use_wal(cursor: Any) -> None:
    """Put the file in WAL mode, which it keeps: only the first opens of a new file switch.

    Switching needs the file to itself, and SQLite answers "database is locked" at once rather
    than waiting out the busy timeout; so connections opening a new file together (several
    engines started at once) retry here, a few milliseconds apart, for up to the busy timeout.
    Connect hooks are synchronous: the short sleeps happen only while a new file is contended.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            mode = cursor.fetchone()
            if mode is not None and str(mode[0]).lower() == "wal":
                return
            reason = f"journal mode stayed {mode[0] if mode else None!r}"
        except Exception as exc:  # the driver's OperationalError, adapted by SQLAlchemy
            if "locked" not in str(exc):
                raise
            reason = str(exc)
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"cannot switch to WAL mode: {reason}")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class _RollingBackConnection(sqlite3.Connection):
    """Closed inside a transaction, roll it back first.

    A task cancelled between a statement and reading its rows (an `UPDATE ... RETURNING`) has
    its connection invalidated: closed with no ROLLBACK while the statement is still active.
    `sqlite3_close_v2` then only marks the connection a zombie, which keeps its transaction and
    the file's write lock until the statement is finalized, whenever the garbage collector
    frees its cursor: every other writer of the file waited out its busy timeout. Rolling back
    resets the active statements and releases the lock before the close."""

    def close(self) -> None:
        if self.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.rollback()
        super().close()


def _sqlite_begin(conn: sa.Connection) -> None:
    read_only = conn.get_execution_options().get(_READ_ONLY, False)
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def translate_error(exc: BaseException, url: DatabaseURL) -> StoreError:
    """One place where driver errors become sluice errors.

    StoreGoneError: the database does not exist (PostgreSQL) or its file is missing (SQLite).
    StoreUnavailableError: a connection could not be made or was lost, or the file failed
    I/O ("disk I/O error": e.g. its -wal removed under a live process). Both exit 4 in the CLI.
    """
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    if url.dialect == "sqlite":
        if "file is not a database" in text:
            return NotADatabaseError(f"{url.path} is not a SQLite database")
        if url.path is not None and not url.path.exists() and _is_sqlite_io_error(text):
            return StoreGoneError(f"the SQLite database {url.path} was removed: {text}")
        if _is_sqlite_io_error(text):
            return StoreUnavailableError(f"database I/O error on {url.path}: {text}")
        return StoreError(f"database error on {url.display}: {text}")
    if _PG_NO_DATABASE.search(text):
        return StoreGoneError(f"the database {url.display} does not exist: {text}")
    invalidated = isinstance(exc, DBAPIError) and exc.connection_invalidated
    if invalidated or isinstance(exc, OperationalError | InterfaceError | OSError):
        return StoreUnavailableError(f"cannot connect to {url.display}: {text}")
    return StoreError(f"database error on {url.display}: {text}")


_PG_NO_DATABASE = re.compile(r'database ".*" does not exist')


def _is_sqlite_io_error(text: str) -> bool:
    return any(mark in text for mark in ("disk I/O error", "unable to open", "no such file"))


class Database:
    """An open database: a connection pool, transactions, and the URL it came from.

    Every transaction reports to `health` (see health.py): a connection error marks an
    outage (one warning per outage, shared by every loop of the process), the next success
    ends it. On SQLite, `check_files` compares the device/inode of the database and its -wal
    with the ones opened: a removed or replaced file raises StoreGoneError (this process
    must stop: its connections write to a file nobody else sees, and other processes then
    fail with "disk I/O error").
    """

    def __init__(self, url: DatabaseURL, engine: AsyncEngine) -> None:
        self.url = url
        self.engine = engine
        self.dialect = url.dialect
        self.health = StoreHealth(url.display)
        # SQLite has one writer at a time; queue writers of this process here rather than in
        # SQLite's busy handler, which sleeps in steps of up to 100 ms.
        self._write_lock = asyncio.Lock() if url.dialect == "sqlite" else None
        self._identities: dict[Path, tuple[int, int]] = {}
        self._direct: SqliteDirect | None = None
        self._pg_direct: PgDirect | None = None

    @classmethod
    async def open(cls, url: str, *, upgrade: bool | None = None) -> Database:
        """Connect, check the file or server, and bring the schema to the latest revision.

        `upgrade=None` upgrades SQLite files (the embedded default) and leaves PostgreSQL to
        `sluice db upgrade`, failing with a hint if its schema is behind.
        """
        parsed = parse_database_url(url)
        if parsed.dialect == "postgresql":
            _require_psycopg()
        engine = _create_engine(parsed, create=_MAY_CREATE.get())
        db = cls(parsed, engine)
        try:
            from sluice.store.migrate import ensure_schema

            await ensure_schema(
                db, upgrade=parsed.dialect == "sqlite" if upgrade is None else upgrade
            )
        except BaseException:
            await engine.dispose()
            raise
        db._remember_files()
        return db

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), committed on normal exit; then
        the hooks registered in it with `after_commit` run."""
        hooks: list[Callable[[], None]] = []
        async with self._writer():
            token = COMMIT_HOOKS.set(hooks)
            try:
                async with self.engine.begin() as conn:
                    yield conn
            except (DBAPIError, DatabaseError) as exc:
                raise self._failed(exc) from exc
            finally:
                COMMIT_HOOKS.reset(token)
        if self.health.down_since is not None:
            self.health.ok()
        for hook in hooks:
            hook()

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only snapshot transaction."""
        try:
            async with self.engine.connect() as conn:
                await conn.execution_options(**{_READ_ONLY: True})
                async with conn.begin():
                    yield conn
        except (DBAPIError, DatabaseError) as exc:
            raise self._failed(exc) from exc
        if self.health.down_since is not None:
            self.health.ok()

    @property
    def write_lock(self) -> asyncio.Lock | None:
        """SQLite: the lock this process's writers queue on (None on PostgreSQL)."""
        return self._write_lock

    @property
    def busy_timeout(self) -> float:
        """Seconds a SQLite writer waits for another process's write lock."""
        return _BUSY_TIMEOUT

    def direct(self) -> SqliteDirect:
        """SQLite: the direct sqlite3 path for short hot transactions (store/direct.py)."""
        if self._direct is None:
            from sluice.store.direct import SqliteDirect

            self._direct = SqliteDirect(self)
        return self._direct

    def pg_direct(self) -> PgDirect:
        """PostgreSQL: the direct psycopg path for hot calls (store/pgdirect.py)."""
        if self._pg_direct is None:
            from sluice.store.pgdirect import PgDirect

            self._pg_direct = PgDirect(self)
        return self._pg_direct

    def failed(self, exc: BaseException) -> StoreError:
        """`exc`, a driver error, as a sluice error; an unreachable store marks an outage."""
        return self._failed(exc)

    def _failed(self, exc: BaseException) -> StoreError:
        error = translate_error(exc, self.url)
        if isinstance(error, StoreUnavailableError):
            self.health.lost(error)
        return error

    async def probe(self) -> None:
        """One trivial round trip; reports to `health` like any transaction."""
        async with self.read() as conn:
            await conn.execute(sa.text("SELECT 1"))

    def _remember_files(self) -> None:
        if self.url.path is None:
            return
        for path in (self.url.path, _wal_path(self.url.path)):
            with contextlib.suppress(OSError):
                stat = path.stat()
                self._identities[path] = (stat.st_dev, stat.st_ino)

    def check_files(self) -> None:
        """SQLite: raise StoreGoneError (and mark `health` fatal) if the database file or its
        -wal was removed or replaced since this process opened them. Two stat calls."""
        if self.url.path is None:
            return
        if _wal_path(self.url.path) not in self._identities:
            self._remember_files()  # the -wal appears with the first write
        for path, identity in self._identities.items():
            try:
                stat = path.stat()
                current: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
            except FileNotFoundError:
                current = None
            if current != identity:
                what = "removed" if current is None else "replaced"
                error = StoreGoneError(
                    f"the SQLite file {path} was {what} while this process had it open; restart it"
                )
                self.health.fail_now(error)
                raise error

    @contextlib.asynccontextmanager
    async def _writer(self) -> AsyncIterator[None]:
        if self._write_lock is None:
            yield
        else:
            async with self._write_lock:
                yield

    async def close(self) -> None:
        if self._direct is not None:
            await self._direct.close()
            self._direct = None
        if self._pg_direct is not None:
            await self._pg_direct.close()
            self._pg_direct = None
        await self.engine.dispose()


def _wal_path(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


PRIVATE_DIR_MODE, PRIVATE_FILE_MODE = 0o700, 0o600
"""The store holds inputs, outputs and tracebacks: only its owner may read it. Directories
sluice creates for a store are 0700, the database file 0600; SQLite gives its -wal and -shm
the mode of the database file, so they are 0600 too. Files that already exist are left as
they are (their owner chose)."""


def make_private_dirs(directory: Path) -> None:
    """Create `directory` and any missing parents as 0700 (chmod after mkdir: the umask
    may only have removed bits)."""
    missing = [d for d in (directory, *directory.parents) if not d.exists()]
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            created.mkdir(mode=PRIVATE_DIR_MODE)
            os.chmod(created, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 unless it exists (an empty file is a valid SQLite
    database). O_EXCL: never changes the mode of someone else's file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)


def _create_engine(url: DatabaseURL, *, create: bool = True) -> AsyncEngine:
    if url.dialect == "sqlite":
        assert url.path is not None
        if url.path.exists() and not url.path.is_file():
            raise NotADatabaseError(f"{url.path} is not a SQLite database (it is a directory)")
        if not create and not url.path.exists():
            raise NotFoundError(
                f"the SQLite database {url.path} does not exist (check --db or "
                "SLUICE_DATABASE_URL; only commands that write create a database)"
            )
        make_private_dirs(url.path.parent)
        create_private_file(url.path)
        engine = create_async_engine(
            url.driver_url,
            pool_size=4,
            max_overflow=4,
            connect_args={"factory": _RollingBackConnection},
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        return engine
    return create_async_engine(
        url.driver_url,
        pool_size=10,
        max_overflow=10,
        pool_pre_ping=True,
        connect_args={"connect_timeout": 5},
    )


def sqlite_data_version_connection(path: Path) -> sqlite3.Connection:
    """A plain connection for polling `PRAGMA data_version`, which changes when another
    connection commits: a cheap cross-process change signal for SQLite."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn
