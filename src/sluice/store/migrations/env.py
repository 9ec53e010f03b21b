"""Alembic environment: always run with a connection handed over by sluice.store.migrate."""

from __future__ import annotations

from alembic import context

from sluice.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `sluice db upgrade`, not the alembic CLI")
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
