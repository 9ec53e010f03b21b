"""`sluice serve`: the concurrency controller, the schedules and an engine in one process."""

from __future__ import annotations

import click
from prometheus_client import start_http_server

from sluice.cli.admin import close_quietly, quiet_expected_store_errors, until_signal
from sluice.cli.common import run_async, state


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
    from sluice.service import Sluice

    service = await Sluice.open(state(ctx).settings, role="serve")
    runtime = service.runtime
    quiet_expected_store_errors(runtime.store.db.health)
    server = None
    fatal = None
    try:
        if metrics_port is not None:
            server, _ = start_http_server(metrics_port, registry=runtime.metrics)
        line = f"sluice serve {runtime.instance_id} on {runtime.store.db.url.display}"
        fatal = await service.serve(
            until_signal(), engine=engine, schedules=schedules, ready=lambda: click.echo(line)
        )
    finally:
        if server is not None:
            server.shutdown()
        await close_quietly(service, fatal)
    if fatal is not None:
        raise fatal  # one line, exit 4, as `sluice engine`
