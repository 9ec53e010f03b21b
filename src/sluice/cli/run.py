"""`sluice run FILE:WORKFLOW`: launch and drive one execution in this process, live."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import IO, Any

import click

from sluice.cli.common import EXIT_FAILED, EXIT_SKIPPED, iso, opened, print_json, run_async
from sluice.cli.logging_setup import logging_options
from sluice.cli.progress import TaskOutput, follow, task_output
from sluice.sdk.loader import load_target
from sluice.service import InputText, RunRequest, Sluice
from sluice.service.local import LocalRun
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
@click.option("--quiet", "-q", is_flag=True, help="Do not show what tasks print.")
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="Run again with the same key: follow the execution it created instead of a new one.",
)
@logging_options("WARNING")
@click.pass_context
@run_async
async def run_command(
    ctx: click.Context,
    target: str,
    pairs: tuple[str, ...],
    inputs_json: str | None,
    overwrite_cache: bool,
    as_json: bool,
    quiet: bool,
    idempotency_key: str | None,
) -> int:
    """Run TARGET (path/to/file.py:workflow, a launch plan or a task) on this machine,
    showing each node's phase and wait reason live. Exit code 0 on success."""
    with _stdout_for_json(as_json) as json_out:
        request = RunRequest.of(
            load_target(target),
            InputText(pairs, inputs_json),
            {"overwrite_cache": overwrite_cache},
            idempotency_key,
        )  # every input error before the store opens
        async with opened(ctx, role="run") as service:
            output = None if quiet or as_json else task_output()  # task lines, above the table
            stop_output = service.on_task_output(output) if output is not None else None
            async with service.run(request) as local:
                final = await _drive(service, local, quiet=as_json, output=output)
            if stop_output is not None:
                stop_output()
            if json_out is not None:
                with contextlib.redirect_stdout(json_out):
                    print_json(await service.execution(final.id))
    if not as_json:
        _report(final)
    if final.phase is ExecutionPhase.SKIPPED:
        return EXIT_SKIPPED
    return 0 if final.phase is ExecutionPhase.SUCCEEDED else EXIT_FAILED


async def _drive(
    service: Sluice, local: LocalRun, quiet: bool, output: TaskOutput | None
) -> ExecutionRecord:
    done = asyncio.Event()
    watcher = (
        None
        if quiet
        else asyncio.create_task(follow(service, local.execution_id, done, output=output))
    )
    interrupts = _on_interrupt(local)
    try:
        return await local.wait()
    finally:
        done.set()
        if watcher is not None:
            await watcher
        interrupts()


def _on_interrupt(local: LocalRun) -> Any:
    """First Ctrl-C aborts the execution (its tasks are aborted and finalized); a second one
    leaves at once."""
    loop = asyncio.get_running_loop()
    pressed: list[asyncio.Task[object]] = []

    def handler() -> None:
        if pressed:
            raise KeyboardInterrupt
        click.echo("aborting the execution (Ctrl-C again to leave now)", err=True)
        pressed.append(loop.create_task(local.abort("interrupted by the user")))

    loop.add_signal_handler(signal.SIGINT, handler)
    return lambda: loop.remove_signal_handler(signal.SIGINT)


@contextlib.contextmanager
def _stdout_for_json(active: bool) -> Iterator[IO[str] | None]:
    """With --json, stdout carries the JSON alone: anything else written to file descriptor 1
    while the command runs (flytekit's import-time log lines, a task module's prints) goes to
    stderr, and the JSON to the stream this yields."""
    if not active:
        yield None
        return
    if not _on_descriptor_1(sys.stdout):  # a captured stdout (click's test runner): in Python
        original = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield original
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    json_out = os.fdopen(os.dup(saved), "w")
    try:
        yield json_out
    finally:
        json_out.flush()
        json_out.close()
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _on_descriptor_1(stream: IO[str]) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


def _report(final: ExecutionRecord) -> None:
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
