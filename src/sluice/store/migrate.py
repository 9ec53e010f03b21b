"""Schema migrations with Alembic, run inside one locked transaction so that concurrent
openers of one database never migrate it twice."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import sqlalchemy as sa
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from sluice.errors import StoreError
from sluice.store.database import Database

_MIGRATIONS = Path(__file__).parent / "migrations"
_PG_MIGRATION_LOCK = 0x51_1CE_0001


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


@cache
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _current_revision(conn: sa.Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def _upgrade(conn: sa.Connection) -> None:
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")


async def ensure_schema(db: Database, *, upgrade: bool) -> str:
    """Bring the schema to head (if `upgrade`) or check it is there; return the revision."""
    head = head_revision()
    async with db.begin() as conn:
        if db.dialect == "postgresql":
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
        current = await conn.run_sync(_current_revision)
        if current == head:
            return head
        if not upgrade:
            raise StoreError(
                f"database {db.url.display} is at schema revision {current or 'none'} but sluice "
                f"needs {head}: run `sluice db upgrade`"
            )
        await conn.run_sync(_upgrade)
    return head
