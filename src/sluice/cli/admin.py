"""`sluice plugins ls`, `sluice db upgrade`, `sluice engine`."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sluice.cli.common import opened, print_json, run_async, state
from sluice.cli.logging_setup import logging_options
from sluice.errors import StoreGoneError

if TYPE_CHECKING:
    from sluice.service import Sluice
    from sluice.store.health import StoreHealth


@click.group("plugins")
def plugins() -> None:
    """Task plugins."""


@plugins.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def plugins_ls(ctx: click.Context, as_json: bool) -> None:
    """Loaded plugins and the task types each handles."""
    async with opened(ctx) as service:
        rows = await service.plugins()
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("id", "task types", "default", "source", "loaded"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.id,
            ", ".join(row.task_types),
            "yes" if row.default else "",
            row.source,
            "yes" if row.loaded else escape(f"no ({row.why})"),  # keeps "[kubernetes]"
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
    from sluice.store.database import Database
    from sluice.store.migrate import ensure_schema

    database = await Database.open(state(ctx).settings.database_url, upgrade=True)
    try:
        revision = await ensure_schema(database, upgrade=True)
    finally:
        await database.close()
    click.echo(f"{database.url.display} is at schema revision {revision}")


@click.command("engine")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics here.")
@logging_options("INFO")
@click.pass_context
@run_async
async def engine_command(ctx: click.Context, metrics_port: int | None) -> None:
    """Run an engine that claims and drives executions until SIGINT or SIGTERM.

    A lost database connection is one warning line and one line when it is back; a database
    that is gone (dropped, its SQLite file removed or replaced) stops the engine with exit 4
    and one message after `engine.store_gone_timeout` seconds.
    """
    from prometheus_client import start_http_server

    from sluice.service import Sluice

    service = await Sluice.open(state(ctx).settings, role="engine")
    runtime = service.runtime
    quiet_expected_store_errors(runtime.store.db.health, runtime.resources.health)
    fatal: StoreGoneError | None = None

    def ready() -> None:
        if metrics_port is not None:
            start_http_server(metrics_port, registry=runtime.metrics)
        click.echo(f"engine {runtime.instance_id} running on {runtime.store.db.url.display}")

    signals = Signals()
    try:
        fatal = await service.run_engine(signals.first(), ready, signals.second)
    finally:
        await close_quietly(service, fatal)
    if fatal is not None:
        raise fatal


async def close_quietly(service: Sluice, fatal: StoreGoneError | None) -> None:
    """Close; when the store is already gone, closing errors say nothing new."""
    try:
        await service.close()
    except Exception:
        if fatal is None:
            raise


def quiet_expected_store_errors(*healths: StoreHealth) -> None:
    """Log warnings to stderr through filters that drop tracebacks of connection errors
    while the outage is already reported (components outside the engine log their own)."""
    root = logging.getLogger()
    if not root.handlers:
        stderr = logging.StreamHandler()
        stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(stderr)
    for handler in root.handlers:
        for health in dict.fromkeys(healths):
            handler.addFilter(health.log_filter)


class Signals:
    """SIGINT and SIGTERM: the first asks for a graceful stop (the engine drains), a second
    for a stop at once."""

    def __init__(self) -> None:
        self._count = 0
        self._first, self._second = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._received)

    def _received(self) -> None:
        self._count += 1
        (self._first if self._count == 1 else self._second).set()

    async def first(self) -> None:
        await self._first.wait()

    @property
    def second(self) -> asyncio.Event:
        """Set at the second signal."""
        return self._second


COMMANDS = [plugins, db, engine_command]
