"""`sluice plugins ls`, `sluice db upgrade`, `sluice engine`."""

from __future__ import annotations

import asyncio
import signal

import click
from prometheus_client import start_http_server
from rich.console import Console
from rich.table import Table

from sluice.cli.common import opened, print_json, run_async, state
from sluice.plugins.builtin import builtin_entries
from sluice.store.database import Database
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
    rows = [
        {
            "id": e.id,
            "task_types": list(e.task_types),
            "default": e.is_default,
            "source": "builtin" if e.id in builtin else "entry point",
            "loaded": e.id in registry.plugins,
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
            "yes" if row["loaded"] else "no (not enabled)",
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
    """Run an engine that claims and drives executions until SIGINT or SIGTERM."""
    async with opened(ctx, role="engine") as runtime:
        engine = await runtime.engine()
        await engine.start()
        if metrics_port is not None:
            start_http_server(metrics_port, registry=runtime.metrics)
        click.echo(f"engine {runtime.instance_id} running on {runtime.store.db.url.display}")
        await _until_signal()
        await engine.stop()


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


COMMANDS = [plugins, db, engine_command]
