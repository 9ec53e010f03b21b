"""`sluice serve`: the concurrency controller, the schedules, an engine and the HTTP API (with
the web UI) in one process; `sluice ui`, the same for a laptop's embedded store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import click
from prometheus_client import start_http_server

from sluice.cli.admin import (
    _close_quietly,
    _until_signal,
    _until_signal_or,
    quiet_expected_store_errors,
)
from sluice.cli.common import run_async, state
from sluice.concurrency.schedules import ScheduleRunner
from sluice.errors import StoreGoneError
from sluice.http.server import DEFAULT_HOST, DEFAULT_PORT, Listening, http_server
from sluice.runtime import Runtime
from sluice.service import Sluice
from sluice.service.local import run_controller_candidate

_HOST_HELP = "Listen on this address; anything but loopback needs API tokens."


def http_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--host` and `--port`, shared by `serve` and `ui`."""
    command = click.option(
        "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True
    )(command)
    return click.option("--host", default=DEFAULT_HOST, show_default=True, help=_HOST_HELP)(command)


@click.command("serve")
@click.option("--engine/--no-engine", default=True, show_default=True, help="Run an engine too.")
@click.option("--schedules/--no-schedules", default=True, show_default=True, help="Fire schedules.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics here.")
@click.option("--http/--no-http", default=True, show_default=True, help="Serve the API and UI.")
@http_options
@click.pass_context
@run_async
async def serve_command(
    ctx: click.Context,
    engine: bool,
    schedules: bool,
    metrics_port: int | None,
    http: bool,
    host: str,
    port: int,
) -> None:
    """Run the concurrency controller (leading, or standing by while another process leads),
    the schedules of ACTIVE launch plans, an engine and the HTTP API with the web UI (on
    127.0.0.1:8080 unless told), until SIGINT or SIGTERM."""
    await serve_all(ctx, engine, schedules, metrics_port, (host, port) if http else None)


@click.command("ui")
@http_options
@click.pass_context
@run_async
async def ui_command(ctx: click.Context, host: str, port: int) -> None:
    """Serve the web UI and the API over this machine's store (the embedded SQLite file
    unless --db says otherwise), with an engine, the controller and the schedules, so
    what is launched runs and moves on the page, until SIGINT or SIGTERM."""
    await serve_all(ctx, True, True, None, (host, port))


async def serve_all(
    ctx: click.Context,
    engine: bool,
    schedules: bool,
    metrics_port: int | None,
    listen: tuple[str, int] | None,
) -> None:
    runtime = await Runtime.open(state(ctx).settings, role="serve")
    quiet_expected_store_errors(runtime.store.db.health)
    server = None
    fatal: StoreGoneError | None = None
    try:
        if metrics_port is not None:
            server, _ = start_http_server(metrics_port, registry=runtime.metrics)
        async with (
            _http(runtime, listen) as listening,
            run_controller_candidate(runtime, metrics=True),
        ):
            fatal = await _serve(runtime, engine, schedules, listening)
    finally:
        if server is not None:
            server.shutdown()
        await _close_quietly(runtime, fatal)
    if fatal is not None:
        raise fatal  # one line, exit 4, as `sluice engine`


async def _serve(
    runtime: Runtime, with_engine: bool, with_schedules: bool, listening: Listening | None
) -> StoreGoneError | None:
    """Serve until a signal (None), or until the engine finds the store gone (its error)."""
    settings = runtime.settings
    runner = ScheduleRunner(runtime.store, runtime.notifier, runtime.clock, settings.concurrency)
    firing = asyncio.create_task(runner.run()) if with_schedules else None
    engine = await runtime.engine() if with_engine else None
    if engine is not None:
        await engine.start()
    click.echo(f"sluice serve {runtime.instance_id} on {runtime.store.db.url.display}")
    if listening is not None:
        auth = "every request needs a token" if listening.needs_token else "no token needed"
        click.echo(f"HTTP API on {listening.url}/api/v1 ({auth}), web UI on {listening.url}/")
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


@contextlib.asynccontextmanager
async def _http(
    runtime: Runtime, listen: tuple[str, int] | None
) -> AsyncIterator[Listening | None]:
    """Listening first, so a taken port fails the command before anything else starts."""
    if listen is None:
        yield None
        return
    async with http_server(Sluice(runtime), *listen) as listening:
        yield listening
