"""Schema migrations with Alembic, run inside one locked transaction so that concurrent
openers of one database never migrate it twice.

Opening a store only reads `alembic_version` and compares it with the head revision read
from the migration files' own `revision` lines: Alembic (and Mako) are imported only when
the schema must change, so every command does not pay for them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from sluice.errors import StoreError
from sluice.store.database import Database

if TYPE_CHECKING:
    from alembic.config import Config

_MIGRATIONS = Path(__file__).parent / "migrations"
_PG_MIGRATION_LOCK = 0x51_1CE_0001
_REVISION = re.compile(r'^(down_)?revision\s*(?::[^=]*)?=\s*["\']?([\w]+|None)["\']?', re.M)


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


@cache
def head_revision() -> str:
    """The revision no other revision builds on, from the version files' own lines."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        for down, value in _REVISION.findall(path.read_text()):
            (parents if down else revisions).add(value)
    heads = revisions - parents
    if len(heads) != 1:
        raise StoreError(f"the schema migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def _current_revision(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def _upgrade(conn: sa.Connection) -> None:
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")


async def ensure_schema(db: Database, *, upgrade: bool) -> str:
    """Bring the schema to head (if `upgrade`) or check it is there; return the revision."""
    head = head_revision()
    async with db.read() as conn:  # the common case: at head, no write lock taken
        if await conn.run_sync(_current_revision) == head:
            return head
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
