"""`sluice executions create LAUNCH_PLAN`: an execution of the ACTIVE version, and the
concurrency controller's decision about it."""

from __future__ import annotations

import json

import click

from sluice.cli.common import EXIT_FAILED, EXIT_SKIPPED, opened, print_json, run_async
from sluice.service import InputText
from sluice.service.models import Execution


@click.command("create")
@click.argument("launch_plan")
@click.option("--input", "-i", "pairs", multiple=True, metavar="NAME=VALUE", help="An input.")
@click.option("--inputs", "inputs_json", metavar="JSON", help="All inputs as a JSON object.")
@click.option(
    "--wait/--no-wait",
    default=False,
    show_default=True,
    help="Also wait for the execution to end, driving it here if no engine takes it.",
)
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="A retry with the same key (within concurrency.idempotency_retention) returns the "
    "execution it created instead of creating another.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def create(
    ctx: click.Context,
    launch_plan: str,
    pairs: tuple[str, ...],
    inputs_json: str | None,
    wait: bool,
    idempotency_key: str | None,
    as_json: bool,
) -> int:
    """Create an execution of the ACTIVE version of LAUNCH_PLAN and print the controller's
    decision: QUEUED, PENDING (with its position and what it waits for) or SKIPPED (exit 3).
    With no live controller, this command runs one for the decision. With --idempotency-key,
    a retry prints the execution the key created (a different request with that key is an
    error, exit 2)."""
    async with opened(ctx) as service:
        inputs = InputText(pairs, inputs_json)
        launched = await service.create_launched(
            launch_plan, inputs, wait=wait, idempotency_key=idempotency_key
        )
        record = launched.execution
        found = await service.execution(record.id)
    if as_json:
        print_json(found)
    else:
        if launched.replayed:
            click.echo(f"idempotency key {idempotency_key!r} created this execution already")
        _print_outcome(found)
    if record.phase == "SKIPPED":
        return EXIT_SKIPPED
    if wait and record.phase != "SUCCEEDED":
        return EXIT_FAILED
    return 0


def _print_outcome(found: Execution) -> None:
    reason = f": {found.reason}" if found.reason else ""
    click.echo(f"execution {found.id} {found.phase}{reason}")
    if found.outputs:
        click.echo("outputs: " + json.dumps(found.outputs, sort_keys=True))
