"""`sluice serve`: the concurrency controller, the schedules, an engine and the HTTP API (with
the web UI) in one process; `sluice ui`: the same over this machine's store, for a laptop."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import click

from sluice.cli.admin import Signals, close_quietly, quiet_expected_store_errors
from sluice.cli.common import run_async, state
from sluice.cli.logging_setup import logging_options

if TYPE_CHECKING:
    from sluice.flyteadmin.server import FlyteListening
    from sluice.http.server import Listening
    from sluice.service import Sluice

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8080
FLYTE_PORT = 8089
_HOST_HELP = "Listen on this address; anything but loopback needs API tokens."


def http_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--host` and `--port`, shared by `serve` and `ui`."""
    command = click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=DEFAULT_PORT,
        show_default=True,
        help="0 takes any free port (printed).",
    )(command)
    return click.option("--host", default=DEFAULT_HOST, show_default=True, help=_HOST_HELP)(command)


@click.command("serve")
@click.option("--engine/--no-engine", default=True, show_default=True, help="Run an engine too.")
@click.option("--schedules/--no-schedules", default=True, show_default=True, help="Fire schedules.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics here.")
@click.option("--http/--no-http", default=True, show_default=True, help="Serve the API and UI.")
@click.option(
    "--flyte/--no-flyte",
    default=None,
    help="Serve Flyte's gRPC API (flyteadmin's, for pyflyte, FlyteRemote and flytectl) "
    "[default: on when the flyte extra is installed]",
)
@click.option(
    "--flyte-port",
    type=click.IntRange(0, 65535),
    default=FLYTE_PORT,
    show_default=True,
    help="Port of the Flyte gRPC API, on --host (0 takes any free port, printed).",
)
@http_options
@logging_options("INFO")
@click.pass_context
@run_async
async def serve_command(
    ctx: click.Context,
    engine: bool,
    schedules: bool,
    metrics_port: int | None,
    http: bool,
    flyte: bool | None,
    flyte_port: int,
    host: str,
    port: int,
) -> None:
    """Run the concurrency controller (leading, or standing by while another process leads),
    the schedules of ACTIVE launch plans, an engine, the HTTP API with the web UI (on
    127.0.0.1:8080 unless told) and Flyte's gRPC API (on port 8089), until SIGINT or
    SIGTERM."""
    given = ctx.get_parameter_source("flyte_port") is not click.core.ParameterSource.DEFAULT
    from sluice.http.server import FALL_FORWARD

    grpc = (flyte_port, 0 if given else FALL_FORWARD) if _flyte_wanted(flyte, http) else None
    listen = _where(ctx, host, port) if http else None
    await serve_all(ctx, engine, schedules, metrics_port, listen, grpc)


def _flyte_wanted(flag: bool | None, http: bool) -> bool:
    """--flyte asks for it (an error without the extra or the HTTP server its uploads go
    through); by default it is on when the flyte extra is installed and HTTP is served."""
    import importlib.util

    installed = all(importlib.util.find_spec(m) is not None for m in ("grpc", "flyteidl"))
    if flag is None:
        return installed and http
    if flag and not installed:
        raise click.UsageError("--flyte needs the flyte extra: pip install 'sluice[flyte]'")
    if flag and not http:
        raise click.UsageError("--flyte needs the HTTP server (uploads go through it)")
    return flag


@click.command("ui")
@http_options
@logging_options("WARNING")
@click.pass_context
@run_async
async def ui_command(ctx: click.Context, host: str, port: int) -> None:
    """Serve the web UI and the API over this machine's store (the embedded SQLite file
    unless --db says otherwise), with an engine, the controller and the schedules, so
    what is launched runs and moves on the page, until SIGINT or SIGTERM."""
    await serve_all(ctx, True, True, None, _where(ctx, host, port))


async def serve_all(
    ctx: click.Context,
    engine: bool,
    schedules: bool,
    metrics_port: int | None,
    listen: Listen | None,
    flyte: tuple[int, int] | None = None,
) -> None:
    from prometheus_client import start_http_server

    from sluice.service import Sluice

    service = await Sluice.open(state(ctx).settings, role="serve")
    runtime = service.runtime
    quiet_expected_store_errors(runtime.store.db.health, runtime.resources.health)
    server = None
    fatal = None
    try:
        if metrics_port is not None:
            server, _ = start_http_server(metrics_port, registry=runtime.metrics)
        signals = Signals()
        async with (
            _http(service, listen) as listening,
            _flyte(service, listening, flyte) as grpc,
        ):
            fatal = await service.serve(
                signals.first(),
                engine=engine,
                schedules=schedules,
                ready=lambda: _announce(service, listening, grpc),
                hurry=signals.second,
            )
    finally:
        if server is not None:
            server.shutdown()
        await close_quietly(service, fatal)
    if fatal is not None:
        raise fatal  # one line, exit 4, as `sluice engine`


Listen = tuple[str, int, int]
"""Host, port, and how many ports after it to try when it is taken."""


def _where(ctx: click.Context, host: str, port: int) -> Listen:
    """The default port falls forward to the next free one (two servers on one host both
    start, the second says where); a port given with --port is that port or an error."""
    given = ctx.get_parameter_source("port") is not click.core.ParameterSource.DEFAULT
    from sluice.http.server import FALL_FORWARD

    return host, port, 0 if given else FALL_FORWARD


def _announce(
    service: Sluice, listening: Listening | None, flyte: FlyteListening | None = None
) -> None:
    runtime = service.runtime
    click.echo(f"sluice serve {runtime.instance_id} on {runtime.store.db.url.display}")
    if listening is not None:
        auth = "every request needs a token" if listening.needs_token else "no token needed"
        click.echo(f"HTTP API on {listening.url}/api/v1 ({auth}), web UI on {listening.url}/")
        if listening.taken is not None:
            click.echo(f"(port {listening.taken} is in use, by another sluice serve?)")
    if flyte is not None:
        click.echo(f"Flyte gRPC API on {flyte.endpoint} (admin.endpoint: dns:///{flyte.endpoint})")


@contextlib.asynccontextmanager
async def _http(service: Sluice, listen: Listen | None) -> AsyncIterator[Listening | None]:
    """Listening first, so a taken port fails the command before anything else starts."""
    if listen is None:
        yield None
        return
    from sluice.http.server import http_server

    host, port, fall_forward = listen
    async with http_server(service, host, port, fall_forward=fall_forward) as listening:
        yield listening


@contextlib.asynccontextmanager
async def _flyte(
    service: Sluice, listening: Listening | None, where: tuple[int, int] | None
) -> AsyncIterator[FlyteListening | None]:
    """Flyte's gRPC API on the HTTP server's host (its port, and how many after it to try
    when it is taken), its uploads signed for that server."""
    if where is None or listening is None:
        yield None
        return
    from urllib.parse import urlsplit

    from sluice.flyteadmin.server import flyteadmin_server

    host = urlsplit(listening.url).hostname or "127.0.0.1"
    port, fall_forward = where
    async with flyteadmin_server(
        service,
        host,
        port,
        http_url=listening.url,
        token_required=listening.needs_token,
        fall_forward=fall_forward,
    ) as flyte:
        yield flyte
