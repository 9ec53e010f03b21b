"""Catalog backends, one per file: `memory` and `sql` (SQLite and PostgreSQL)."""

from __future__ import annotations

from urllib.parse import urlsplit

from sluice.cache.backends.memory import MemoryRepository
from sluice.cache.backends.sql import SqlRepository
from sluice.cache.base import CatalogRepository
from sluice.store.database import Database
from sluice.store.notify import Notifier

__all__ = ["MemoryRepository", "SqlRepository", "open_repository"]


async def open_repository(
    url: str, *, notifier: Notifier | None = None, upgrade: bool | None = None
) -> CatalogRepository:
    """`memory://` for tests, else a database URL (`sqlite:///path`, `postgresql://...`) that
    the repository opens (`upgrade` as in `Database.open`) and closes on `close()`.

    An unknown scheme raises InvalidArgumentError naming the accepted ones.
    """
    if urlsplit(url).scheme == "memory":
        return MemoryRepository()
    return SqlRepository(
        await Database.open(url, upgrade=upgrade), notifier=notifier, owns_database=True
    )
