"""`sluice plugins ls`, `sluice db upgrade`, `sluice engine`."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import click
from prometheus_client import start_http_server
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sluice.cli.common import opened, print_json, run_async, state
from sluice.errors import StoreGoneError
from sluice.plugins.builtin import builtin_entries
from sluice.store.database import Database
from sluice.store.health import StoreHealth

if TYPE_CHECKING:
    from sluice.runtime import Runtime
from sluice.store.migrate import ensure_schema


@click.group("plugins")
def plugins() -> None:
    """Task plugins."""


@plugins.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def plugins_ls(ctx: click.Context, as_json: bool) -> None:
    """Loaded plugins and the task types each handles."""
    async with opened(ctx) as runtime:
        registry = await runtime.load_plugins()
    builtin = {e.id for e in builtin_entries()}
    unavailable = registry.unavailable()
    rows = [
        {
            "id": e.id,
            "task_types": list(e.task_types),
            "default": e.is_default,
            "source": "builtin" if e.id in builtin else "entry point",
            "loaded": e.id in registry.plugins and e.id not in unavailable,
            "why": unavailable.get(e.id) or (None if e.id in registry.plugins else "not enabled"),
        }
        for e in registry.entries
    ]
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("id", "task types", "default", "source", "loaded"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["id"]),
            ", ".join(row["task_types"]),  # type: ignore[arg-type]
            "yes" if row["default"] else "",
            str(row["source"]),
            "yes" if row["loaded"] else escape(f"no ({row['why']})"),  # keeps "[kubernetes]"
        )
    Console().print(table)


@click.group("db")
def db() -> None:
    """The state database."""


@db.command("upgrade")
@click.pass_context
@run_async
async def db_upgrade(ctx: click.Context) -> None:
    """Create or upgrade the schema to the latest revision."""
    database = await Database.open(state(ctx).settings.database_url, upgrade=True)
    try:
        revision = await ensure_schema(database, upgrade=True)
    finally:
        await database.close()
    click.echo(f"{database.url.display} is at schema revision {revision}")


@click.command("engine")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics here.")
@click.pass_context
@run_async
async def engine_command(ctx: click.Context, metrics_port: int | None) -> None:
    """Run an engine that claims and drives executions until SIGINT or SIGTERM.

    A lost database connection is one warning line and one line when it is back; a database
    that is gone (dropped, its SQLite file removed or replaced) stops the engine with exit 4
    and one message after `engine.store_gone_timeout` seconds.
    """
    from sluice.runtime import Runtime

    runtime = await Runtime.open(state(ctx).settings, role="engine")
    quiet_expected_store_errors(runtime.store.db.health)
    fatal: StoreGoneError | None = None
    try:
        engine = await runtime.engine()
        await engine.start()
        if metrics_port is not None:
            start_http_server(metrics_port, registry=runtime.metrics)
        click.echo(f"engine {runtime.instance_id} running on {runtime.store.db.url.display}")
        fatal = await _until_signal_or(engine.wait_fatal())
        await engine.stop()
    finally:
        await _close_quietly(runtime, fatal)
    if fatal is not None:
        raise fatal


async def _close_quietly(runtime: Runtime, fatal: StoreGoneError | None) -> None:
    """Close; when the store is already gone, closing errors say nothing new."""
    try:
        await runtime.close()
    except Exception:
        if fatal is None:
            raise


def quiet_expected_store_errors(health: StoreHealth) -> None:
    """Log warnings to stderr through a filter that drops tracebacks of connection errors
    while the outage is already reported (components outside the engine log their own)."""
    root = logging.getLogger()
    if not root.handlers:
        stderr = logging.StreamHandler()
        stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(stderr)
    for handler in root.handlers:
        handler.addFilter(health.log_filter)


async def _until_signal_or(fatal: Coroutine[Any, Any, StoreGoneError]) -> StoreGoneError | None:
    """Wait for SIGINT/SIGTERM (None) or for `fatal` to return its error."""
    signalled = asyncio.ensure_future(_until_signal())
    failed = asyncio.ensure_future(fatal)
    await asyncio.wait([signalled, failed], return_when=asyncio.FIRST_COMPLETED)
    for task in (signalled, failed):
        task.cancel()
    return failed.result() if failed.done() and not failed.cancelled() else None


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


COMMANDS = [plugins, db, engine_command]
