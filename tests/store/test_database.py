"""Opening databases: URL parsing, SQLite file checks and pragmas, PostgreSQL errors."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from sluice.errors import (
    InvalidArgumentError,
    NotADatabaseError,
    StoreError,
    StoreGoneError,
    StoreUnavailableError,
)
from sluice.store.database import Database, parse_database_url
from sluice.store.health import StoreHealth
from sluice.store.migrate import ensure_schema, head_revision
from sluice.store.store import Store

# --- URLs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path", "driver_url"),
    [
        (
            "sqlite:///relative/sluice.db",
            Path("relative/sluice.db"),
            "sqlite+aiosqlite:///relative/sluice.db",
        ),
        (
            "sqlite:////abs/dir/sluice.db",
            Path("/abs/dir/sluice.db"),
            "sqlite+aiosqlite:////abs/dir/sluice.db",
        ),
        ("sqlite+aiosqlite:///x.db", Path("x.db"), "sqlite+aiosqlite:///x.db"),
        ("SQLITE:///x.db", Path("x.db"), "sqlite+aiosqlite:///x.db"),
    ],
)
def test_parse_sqlite_urls(url: str, path: Path, driver_url: str) -> None:
    parsed = parse_database_url(url)
    assert (parsed.dialect, parsed.path, parsed.driver_url) == ("sqlite", path, driver_url)
    assert parsed.raw == url
    assert parsed.sync_url == driver_url.replace("+aiosqlite", "")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:pw@db.example:5433/sluice",
        "postgres://user:pw@db.example:5433/sluice",
        "postgresql+psycopg://user:pw@db.example:5433/sluice",
    ],
)
def test_parse_postgresql_urls(url: str) -> None:
    parsed = parse_database_url(url)
    assert parsed.dialect == "postgresql"
    assert parsed.path is None
    assert parsed.driver_url == "postgresql+psycopg://user:pw@db.example:5433/sluice"


def test_display_hides_the_password() -> None:
    parsed = parse_database_url("postgresql://user:s3cret@db.example/sluice")
    assert "s3cret" not in parsed.display
    assert parsed.display.startswith("postgresql://user:")
    assert "psycopg" not in parsed.display
    assert parse_database_url("sqlite:///a/b.db").display == "sqlite:///a/b.db"


@pytest.mark.parametrize("url", ["mysql://h/db", "redis://localhost", "memory://", "db.sqlite"])
def test_unknown_scheme_is_an_error_naming_it(url: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        parse_database_url(url)
    assert repr(url) in str(caught.value)
    assert "sqlite:///" in str(caught.value) and "postgresql://" in str(caught.value)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_sqlite_url_without_a_path_is_an_error(url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="no file path"):
        parse_database_url(url)


# --- SQLite ------------------------------------------------------------------------------------


async def test_store_open_refuses_an_unknown_scheme() -> None:
    with pytest.raises(InvalidArgumentError):
        await Store.open("mysql://h/db")


@pytest.mark.parametrize(
    "content",
    [
        bytes(range(256)) * 16,
        b"hello, this is a text file and not a database\n" * 100,
        b"SQLite format 3\x00" + b"\xff" * 4080,
    ],
    ids=["binary", "text", "bad-header"],
)
async def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(NotADatabaseError) as caught:
        await Store.open(f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["notes.db"]  # no -wal, no -shm


async def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(NotADatabaseError, match=str(tmp_path)):
        await Store.open(f"sqlite:///{tmp_path}")


async def test_sqlite_creates_missing_directories_and_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "sluice.db"
    store = await Store.open(f"sqlite:///{path}")
    try:
        assert path.is_file()
        async with store.db.read() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
            busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar_one()
        assert str(mode).lower() == "wal"
        assert int(busy) > 0
    finally:
        await store.close()
    with sqlite3.connect(path) as plain:  # WAL is a property of the file: other tools see it
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in plain.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"executions", "node_executions", "events", "alembic_version"} <= tables


async def test_sqlite_upgrades_itself_on_open_by_default(sqlite_url: str) -> None:
    store = await Store.open(sqlite_url)  # upgrade=None: the embedded store upgrades itself
    try:
        assert await ensure_schema(store.db, upgrade=False) == head_revision()
    finally:
        await store.close()


async def test_sqlite_with_upgrade_false_refuses_an_empty_file(sqlite_url: str) -> None:
    with pytest.raises(StoreError, match="sluice db upgrade"):
        await Store.open(sqlite_url, upgrade=False)


async def test_a_failed_write_transaction_is_rolled_back(sqlite_url: str) -> None:
    db = await Database.open(sqlite_url)
    try:
        with contextlib.suppress(RuntimeError):
            async with db.begin() as conn:
                await conn.execute(sa.text("CREATE TABLE scratch (x INTEGER)"))
                raise RuntimeError("abort")
        async with db.read() as conn:
            found = await conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE name = 'scratch'"
            )
            assert found.scalar_one() == 0
    finally:
        await db.close()


async def test_sql_errors_are_translated_to_store_errors(sqlite_url: str) -> None:
    db = await Database.open(sqlite_url)
    try:
        with pytest.raises(StoreError, match="no_such_table"):
            async with db.read() as conn:
                await conn.execute(sa.text("SELECT * FROM no_such_table"))
        with pytest.raises(StoreError):
            async with db.begin() as conn:
                await conn.execute(sa.text("INSERT INTO no_such_table VALUES (1)"))
    finally:
        await db.close()


# --- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_unreachable_postgresql_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailableError) as caught:
        await Store.open("postgresql://postgres:hunter2@127.0.0.1:1/sluice")
    assert "127.0.0.1" in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.postgres
async def test_postgresql_behind_schema_needs_sluice_db_upgrade(empty_pg_url: str) -> None:
    for upgrade in (False, None):  # None: PostgreSQL is left to `sluice db upgrade`
        with pytest.raises(StoreError) as caught:
            await Store.open(empty_pg_url, upgrade=upgrade)
        assert "sluice db upgrade" in str(caught.value)
        assert head_revision() in str(caught.value)
    upgraded = await Store.open(empty_pg_url, upgrade=True)
    await upgraded.close()
    checked = await Store.open(empty_pg_url, upgrade=False)
    await checked.close()


@pytest.mark.postgres
async def test_unknown_postgresql_database_is_store_unavailable(pg_database_url: str) -> None:
    base = pg_database_url.rpartition("/")[0]
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        await Store.open(f"{base}/sluice_no_such_db_{secrets.token_hex(3)}")


@pytest.mark.postgres
async def test_postgresql_resource_functions_come_and_go_with_revisions_0002_to_0006(
    empty_pg_url: str,
) -> None:
    from alembic import command

    from sluice.store.migrate import alembic_config

    def functions(conn: sa.Connection) -> set[str]:
        rows = conn.exec_driver_sql(
            "SELECT proname FROM pg_proc WHERE starts_with(proname, 'sluice_resources_')"
        )
        return {row[0] for row in rows}

    def release_source(conn: sa.Connection) -> str:
        row = conn.exec_driver_sql(
            "SELECT prosrc FROM pg_proc WHERE proname = 'sluice_resources_try_release'"
        )
        return str(row.scalar_one())

    def move(conn: sa.Connection, target: str, up: bool) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        (command.upgrade if up else command.downgrade)(config, target)

    store = await Store.open(empty_pg_url, upgrade=True)
    try:
        async with store.db.begin() as conn:
            assert "sluice_resources_load" in await conn.run_sync(functions)
            assert "sluice_resources_try_grant_waiter" in await conn.run_sync(functions)
            await conn.run_sync(move, "0005", False)
            assert len(await conn.run_sync(functions)) == 9  # 0006's waiter grant is gone
            assert "set_config" not in await conn.run_sync(release_source)  # 0005's release
            await conn.run_sync(move, "0004", False)
            assert len(await conn.run_sync(functions)) == 7  # 0005's two are gone
            await conn.run_sync(move, "0001", False)
            assert await conn.run_sync(functions) == set()
            await conn.run_sync(move, "head", True)
            assert len(await conn.run_sync(functions)) == 10
            assert "set_config" in await conn.run_sync(release_source)
    finally:
        await store.close()


# --- Losing the database ---------------------------------------------------------------------


@pytest.mark.postgres
async def test_an_unknown_postgresql_database_is_gone(pg_database_url: str) -> None:
    base = pg_database_url.rpartition("/")[0]
    with pytest.raises(StoreGoneError, match="does not exist"):
        await Store.open(f"{base}/sluice_no_such_db_{secrets.token_hex(3)}")


@pytest.mark.parametrize("replaced", ["s.db", "s.db-wal"])
async def test_a_replaced_or_removed_sqlite_file_is_detected(tmp_path: Path, replaced: str) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 's.db'}")
    try:
        async with store.write() as repos:
            await repos.executions.release("none", "nobody")
        store.db.check_files()  # nothing changed: no error
        target = tmp_path / replaced
        copy = tmp_path / "copy"
        copy.write_bytes(target.read_bytes())
        os.replace(copy, target)  # same name, new inode
        with pytest.raises(StoreGoneError, match="replaced"):
            store.db.check_files()
        assert store.db.health.fatal is not None
    finally:
        await store.close()


def test_an_outage_is_one_warning_and_one_recovery_line(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    health = StoreHealth("db", clock=lambda: now[0])
    health.announce = True
    health.gone_timeout = 5.0
    caplog.set_level(logging.WARNING, logger="sluice.store.health")
    for _ in range(100):
        health.lost(StoreUnavailableError("connection refused"))
    assert health.down and health.fatal is None
    health.ok()
    health.ok()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "lost the database db",
        "the database db is back after 0.0s",
    ]
    assert all(r.exc_info is None for r in caplog.records)
    assert health.expected(StoreError("wrapped")) is False
    wrapped = StoreError("outer")
    wrapped.__cause__ = StoreUnavailableError("inner")
    assert health.expected(wrapped)


def test_a_gone_database_is_fatal_only_after_the_bounded_retry() -> None:
    now = [0.0]
    health = StoreHealth("db", clock=lambda: now[0])
    health.gone_timeout = 5.0
    health.lost(StoreGoneError("dropped"))
    now[0] = 4.9
    health.lost(StoreGoneError("dropped"))
    assert health.fatal is None
    health.lost(StoreUnavailableError("refused"))  # still not back
    now[0] = 5.0
    health.lost(StoreGoneError("dropped"))
    assert isinstance(health.fatal, StoreGoneError)


async def test_task_logs_table_comes_and_goes_with_revision_0003(sqlite_url: str) -> None:
    from alembic import command

    from sluice.store.migrate import alembic_config

    def tables(conn: sa.Connection) -> set[str]:
        return set(sa.inspect(conn).get_table_names())

    def release_source(conn: sa.Connection) -> str:
        row = conn.exec_driver_sql(
            "SELECT prosrc FROM pg_proc WHERE proname = 'sluice_resources_try_release'"
        )
        return str(row.scalar_one())

    def move(conn: sa.Connection, target: str, up: bool) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        (command.upgrade if up else command.downgrade)(config, target)

    store = await Store.open(sqlite_url)
    try:
        assert head_revision() >= "0003"  # revisions are numbered in order
        async with store.db.begin() as conn:
            assert "task_logs" in await conn.run_sync(tables)
            await conn.run_sync(move, "0002", False)
            assert "task_logs" not in await conn.run_sync(tables)
            await conn.run_sync(move, "head", True)
            assert "task_logs" in await conn.run_sync(tables)
    finally:
        await store.close()


async def test_a_connection_closed_mid_transaction_gives_the_write_lock_back(
    tmp_path: Path,
) -> None:
    """A task cancelled between its statement and reading the statement's rows has its
    connection invalidated: closed with no ROLLBACK and a cursor still open. sqlite3 then only
    marks the connection closed and keeps its transaction, with the file's write lock, until the
    cursor is garbage-collected: every other writer waited its whole busy timeout (seen as
    "database is locked" after 30 s when one runtime stopped while another ran)."""
    path = tmp_path / "s.db"
    db = await Database.open(f"sqlite:///{path}", upgrade=True)
    try:
        async with db.begin() as setup:
            await setup.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            await setup.exec_driver_sql("INSERT INTO t VALUES (1), (2)")
        conn = await db.engine.connect()
        await conn.begin()  # BEGIN IMMEDIATE: this connection has the write lock
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        # a promotion's UPDATE ... RETURNING, its rows not fetched yet: the statement is active
        open_cursor = await driver.execute("UPDATE t SET k = k RETURNING k")
        await conn.invalidate()
        other = sqlite3.connect(path, timeout=0.2, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" while the lock is kept
            other.execute("ROLLBACK")
        finally:
            other.close()
        del open_cursor
    finally:
        await db.close()
