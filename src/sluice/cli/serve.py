"""`sluice serve`: the concurrency controller, the schedules and an engine in one process."""

from __future__ import annotations

import asyncio
import contextlib

import click
from prometheus_client import start_http_server

from sluice.cli.admin import (
    _close_quietly,
    _until_signal,
    _until_signal_or,
    quiet_expected_store_errors,
)
from sluice.cli.common import run_async, state
from sluice.embedded import run_controller_candidate
from sluice.errors import StoreGoneError
from sluice.executions.schedules import ScheduleRunner
from sluice.runtime import Runtime


@click.command("serve")
@click.option("--engine/--no-engine", default=True, show_default=True, help="Run an engine too.")
@click.option("--schedules/--no-schedules", default=True, show_default=True, help="Fire schedules.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics here.")
@click.pass_context
@run_async
async def serve_command(
    ctx: click.Context, engine: bool, schedules: bool, metrics_port: int | None
) -> None:
    """Run the concurrency controller (leading, or standing by while another process leads),
    the schedules of ACTIVE launch plans and an engine, until SIGINT or SIGTERM."""
    runtime = await Runtime.open(state(ctx).settings, role="serve")
    quiet_expected_store_errors(runtime.store.db.health)
    server = None
    fatal: StoreGoneError | None = None
    try:
        if metrics_port is not None:
            server, _ = start_http_server(metrics_port, registry=runtime.metrics)
        async with run_controller_candidate(runtime, metrics=True):
            fatal = await _serve(runtime, engine, schedules)
    finally:
        if server is not None:
            server.shutdown()
        await _close_quietly(runtime, fatal)
    if fatal is not None:
        raise fatal  # one line, exit 4, as `sluice engine`


async def _serve(
    runtime: Runtime, with_engine: bool, with_schedules: bool
) -> StoreGoneError | None:
    """Serve until a signal (None), or until the engine finds the store gone (its error)."""
    settings = runtime.settings
    runner = ScheduleRunner(runtime.store, runtime.notifier, runtime.clock, settings.concurrency)
    firing = asyncio.create_task(runner.run()) if with_schedules else None
    engine = await runtime.engine() if with_engine else None
    if engine is not None:
        await engine.start()
    click.echo(f"sluice serve {runtime.instance_id} on {runtime.store.db.url.display}")
    try:
        if engine is None:
            await _until_signal()
            return None
        return await _until_signal_or(engine.wait_fatal())
    finally:
        if engine is not None:
            await engine.stop()
        if firing is not None:
            firing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await firing
