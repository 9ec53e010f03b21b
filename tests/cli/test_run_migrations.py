"""`sluice run` and the schema, with everything a run now does before its imports (the early
worker, the asyncio package without the ORM): a fresh SQLite file is created at the head
revision, an old one is upgraded, and a PostgreSQL database behind the head is refused with
the command that fixes it, as before."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from sluice.store.migrate import alembic_config, head_revision

FLOW = """
import sluice


@sluice.task
def hello() -> str:
    return "hi"


@sluice.workflow
def one() -> str:
    return hello()
"""


def run(tmp_path: Path, db_url: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "one.py").write_text(FLOW)
    return subprocess.run(
        [sys.executable, "-m", "sluice", "--db", db_url, "run", "one.py:one"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "SLUICE_DATABASE_URL"},
        timeout=120,
    )


def revision(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def test_a_run_creates_a_fresh_sqlite_store_at_head(tmp_path: Path) -> None:
    db = tmp_path / "new" / "s.db"
    done = run(tmp_path, f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    assert 'outputs: {"o0": "hi"}' in done.stdout
    assert revision(db) == head_revision()


def test_a_run_upgrades_an_old_sqlite_store(tmp_path: Path) -> None:
    from alembic import command

    db = tmp_path / "old.db"
    config = alembic_config()
    with sa.create_engine(f"sqlite:///{db}").begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0002")
    assert revision(db) == "0002"
    done = run(tmp_path, f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    assert revision(db) == head_revision()


@pytest.mark.postgres
def test_a_run_on_a_postgresql_store_behind_head_is_refused(
    tmp_path: Path, empty_pg_url: str
) -> None:
    done = run(tmp_path, empty_pg_url)
    assert done.returncode == 2, done.stderr
    assert "sluice db upgrade" in done.stderr and head_revision() in done.stderr
