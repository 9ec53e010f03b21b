"""The resource manager's tables (created by the store's migrations), under their own names,
and the column orders that the PostgreSQL functions of migration 0002 share with Python."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.schema import Table

from sluice.resources.models import QuotaSource
from sluice.store import schema

HOLDERS = schema.resource_holders
"""One row per (namespace, token) granted: units, holder, lease expiry."""
WAITERS = schema.resource_waiters
"""One row per (namespace, token) refused and still asking: its place in the fair order."""
QUOTAS = schema.resource_quotas
"""One row per namespace: its quota from each source (operator, config, plugin, default)."""
USAGE = schema.resource_usage
"""Units in use per (namespace, project, domain); ALL in both is the namespace's total."""

ALL = ""
"""Project and domain of a namespace's global counter row."""
ScopeKey = tuple[str, str, str]
"""(namespace, project, domain) of a usage counter row."""

SOURCE_COLUMNS: dict[QuotaSource, str] = {
    "operator": "operator_quota",
    "config": "config_quota",
    "plugin": "plugin_quota",
    "default": "default_quota",
}
SOURCE_ORDER: tuple[QuotaSource, ...] = ("operator", "config", "plugin", "default")
"""The order of the quota columns in a source row of the PostgreSQL functions."""

WAITER_COLUMNS = (
    "namespace",
    "token",
    "project",
    "domain",
    "execution_id",
    "node_id",
    "units",
    "priority",
    "project_cap",
    "domain_cap",
    "first_requested_at",
    "expires_at",
    "blocking_scope",
)
"""The order of a waiter row's fields, here and in the PostgreSQL functions."""


def upsert_into(conn: AsyncConnection, table: Table) -> Any:
    """An INSERT of the connection's dialect, which offers ON CONFLICT DO UPDATE."""
    if conn.dialect.name == "postgresql":  # imported here: a SQLite store never loads it
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    return sqlite.insert(table)
