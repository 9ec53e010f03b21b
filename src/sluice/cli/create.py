"""`sluice executions create LAUNCH_PLAN`: an execution of the ACTIVE version, and the
concurrency controller's decision about it."""

from __future__ import annotations

import json

import click

from sluice.cli.common import EXIT_FAILED, EXIT_SKIPPED, print_json, run_async, state
from sluice.cli.inputs import parse_inputs
from sluice.cli.run import execution_json
from sluice.embedded import await_decision, controller_if_pending, wait_for_end
from sluice.executions.launch import claim_limits, create_execution, merge_inputs
from sluice.executions.launch_plans import LaunchPlanService
from sluice.runtime import Runtime
from sluice.spec.names import check_entity_name
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord

_DECISION_WAIT = 15.0  # seconds to wait for the controller's decision


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
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def create(
    ctx: click.Context,
    launch_plan: str,
    pairs: tuple[str, ...],
    inputs_json: str | None,
    wait: bool,
    as_json: bool,
) -> int:
    """Create an execution of the ACTIVE version of LAUNCH_PLAN and print the controller's
    decision: QUEUED, PENDING (with its position and what it waits for) or SKIPPED (exit 3).
    With no live controller, this command runs one for the decision."""
    check_entity_name("launch plan name", launch_plan)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        record = await create_and_decide(runtime, launch_plan, pairs, inputs_json, wait)
    finally:
        await runtime.close()
    _print_outcome(record, as_json)
    if record.phase is ExecutionPhase.SKIPPED:
        return EXIT_SKIPPED
    if wait and record.phase is not ExecutionPhase.SUCCEEDED:
        return EXIT_FAILED
    return 0


async def create_and_decide(
    runtime: Runtime, name: str, pairs: tuple[str, ...], inputs_json: str | None, wait: bool
) -> ExecutionRecord:
    settings = runtime.settings
    service = LaunchPlanService(
        runtime.store, runtime.notifier, runtime.clock, settings.project, settings.domain
    )
    spec, workflow = await service.active(name)
    values = parse_inputs(workflow, pairs, inputs_json)
    merge_inputs(workflow, values, spec)  # every input error before anything is written
    record = await create_execution(
        runtime.store,
        runtime.notifier,
        runtime.clock,
        project=settings.project,
        domain=settings.domain,
        workflow=workflow,
        inputs=values,
        launch_plan=spec,
        limits=claim_limits(runtime.resources, settings.resources),
    )
    assert record is not None
    async with controller_if_pending(runtime, record):
        record = await await_decision(runtime, record.id, _DECISION_WAIT)
        if wait and not record.phase.is_terminal:
            record = await _drive(runtime, record.id)
    return record


async def _drive(runtime: Runtime, execution_id: str) -> ExecutionRecord:
    engine = await runtime.engine(only=[execution_id])
    await engine.start()
    try:
        return await wait_for_end(runtime, engine, execution_id)
    finally:
        await engine.stop()


def _print_outcome(record: ExecutionRecord, as_json: bool) -> None:
    if as_json:
        print_json(execution_json(record))
        return
    reason = f": {record.reason}" if record.reason else ""
    click.echo(f"execution {record.id} {record.phase.value}{reason}")
    if record.outputs:
        click.echo("outputs: " + json.dumps(record.outputs, sort_keys=True))
