"""`sluice executions signal EXEC NODE VALUE`: answer a gate that waits (a flytekit
`wait_for_input`'s value, an `approve`'s true or false)."""

from __future__ import annotations

import click

from sluice.cli.common import opened, print_json, run_async
from sluice.service.signals import parse_signal_value


@click.command("signal")
@click.argument("execution_id")
@click.argument("node_id")
@click.argument("value")
@click.option("--json", "as_json", is_flag=True, help="Print the signal's event as JSON.")
@click.pass_context
@run_async
async def signal(
    ctx: click.Context, execution_id: str, node_id: str, value: str, as_json: bool
) -> None:
    """Give VALUE to the gate NODE_ID of EXECUTION_ID that waits for it: JSON (5, true,
    "text", [1, 2]) or a bare string; `true` approves an approve gate, `false` rejects it.
    The engine driving the execution takes it at the gate's next look (within a second)."""
    async with opened(ctx) as service:
        event = await service.signal(execution_id, node_id, parse_signal_value(value))
    if as_json:
        print_json(event)
        return
    click.echo(f"execution {event.execution_id} node {event.node_id}: {event.reason}")
