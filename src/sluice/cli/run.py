"""`sluice run FILE:WORKFLOW`: launch and drive one execution in this process, live."""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import click

from sluice.cli.common import EXIT_FAILED, EXIT_SKIPPED, iso, opened, print_json, run_async
from sluice.cli.inputs import parse_inputs
from sluice.cli.progress import follow
from sluice.embedded import controller_if_pending, prepare_launch_plan, wait_for_end
from sluice.executions.launch import merge_inputs, request_abort
from sluice.runtime import Runtime, resolve_target
from sluice.sdk.loader import load_target
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord


@click.command("run")
@click.argument("target")
@click.option(
    "--input",
    "-i",
    "pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A workflow input; repeat for several.",
)
@click.option("--inputs", "inputs_json", metavar="JSON", help="All inputs as a JSON object.")
@click.option("--overwrite-cache", is_flag=True, help="Skip cache lookups; overwrite entries.")
@click.option("--json", "as_json", is_flag=True, help="Print the final execution as JSON.")
@click.pass_context
@run_async
async def run_command(
    ctx: click.Context,
    target: str,
    pairs: tuple[str, ...],
    inputs_json: str | None,
    overwrite_cache: bool,
    as_json: bool,
) -> int:
    """Run TARGET (path/to/file.py:workflow, a launch plan or a task) on this machine,
    showing each node's phase and wait reason live. Exit code 0 on success."""
    obj = load_target(target)
    workflow, launch_plan = resolve_target(obj)
    values = parse_inputs(workflow, pairs, inputs_json)
    merge_inputs(workflow, values, launch_plan)  # every input error before the store opens
    options = {"overwrite_cache": overwrite_cache}
    async with opened(ctx, role="run") as runtime:
        await runtime.check_launch(obj, values, options)  # before the plan is stored
        await prepare_launch_plan(runtime, obj)
        record = await runtime.launch(obj, values, options=options)
        async with controller_if_pending(runtime, record):
            final = await _drive(runtime, record, quiet=as_json)
    _report(final, as_json)
    if final.phase is ExecutionPhase.SKIPPED:
        return EXIT_SKIPPED
    return 0 if final.phase is ExecutionPhase.SUCCEEDED else EXIT_FAILED


async def _drive(runtime: Runtime, record: ExecutionRecord, quiet: bool) -> ExecutionRecord:
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    done = asyncio.Event()
    watcher = None if quiet else asyncio.create_task(follow(runtime.store, record.id, done))
    interrupts = _on_interrupt(runtime, record.id)
    try:
        return await wait_for_end(runtime, engine, record.id)
    finally:
        done.set()
        if watcher is not None:
            await watcher
        interrupts()
        await engine.stop()


def _on_interrupt(runtime: Runtime, execution_id: str) -> Any:
    """First Ctrl-C aborts the execution (its tasks are aborted and finalized); a second one
    leaves at once."""
    loop = asyncio.get_running_loop()
    pressed: list[asyncio.Task[object]] = []

    def handler() -> None:
        if pressed:
            raise KeyboardInterrupt
        click.echo("aborting the execution (Ctrl-C again to leave now)", err=True)
        pressed.append(
            loop.create_task(
                request_abort(
                    runtime.store,
                    runtime.notifier,
                    runtime.clock,
                    execution_id,
                    "interrupted by the user",
                )
            )
        )

    loop.add_signal_handler(signal.SIGINT, handler)
    return lambda: loop.remove_signal_handler(signal.SIGINT)


def _report(final: ExecutionRecord, as_json: bool) -> None:
    if as_json:
        print_json(execution_json(final))
        return
    click.echo(f"execution {final.id} {final.phase.value} at {iso(final.ended_at)}")
    if final.outputs:
        click.echo("outputs: " + json.dumps(final.outputs, sort_keys=True))
    if final.error:
        node = final.error.get("node")
        where = f" in node {node}" if node else ""
        click.echo(
            f"error{where}: {final.error.get('code')}: {final.error.get('message', '').strip()}",
            err=True,
        )
    elif final.reason and final.phase is not ExecutionPhase.SUCCEEDED:
        click.echo(f"reason: {final.reason}", err=True)


def execution_json(record: ExecutionRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "project": record.project,
        "domain": record.domain,
        "workflow": record.workflow_key,
        "launch_plan": record.launch_plan,
        "phase": record.phase.value,
        "reason": record.reason,
        "inputs": record.inputs,
        "outputs": record.outputs,
        "error": record.error,
        "priority": record.priority,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "owner": record.owner,
    }
