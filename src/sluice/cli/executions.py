"""`sluice executions ls|show|abort` (`create` is in cli/create.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import click
import sqlalchemy as sa
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sluice.cancellation import wait_event
from sluice.cli.common import EXIT_FAILED, iso, print_json, run_async, state
from sluice.cli.progress import node_phase_label
from sluice.cli.run import execution_json
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.executions.launch import request_abort
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from sluice.spec.values import MAX_LIST_LIMIT, check_count
from sluice.store import schema
from sluice.store.notify import EXECUTIONS_CHANNEL, WAKE_ALL
from sluice.store.records import ExecutionRecord, NodeRecord
from sluice.store.store import Repos


@click.group("executions")
def executions() -> None:
    """List, inspect, abort and create executions."""


def _phases(values: tuple[str, ...]) -> list[ExecutionPhase] | None:
    if not values:
        return None
    try:
        return [ExecutionPhase(v.upper()) for v in values]
    except ValueError:
        names = ", ".join(p.value.lower() for p in ExecutionPhase)
        raise InvalidArgumentError(f"--phase {values!r}: phases are {names}") from None


@executions.command("ls")
@click.option("--phase", "phases", multiple=True, help="Only these phases (repeatable).")
@click.option("--limit", default=50, show_default=True, type=int, help="At most this many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ls(ctx: click.Context, phases: tuple[str, ...], limit: int, as_json: bool) -> None:
    limit = check_count("--limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
    """Executions, newest first; PENDING ones with their position in their launch plan's
    queue (promotion order: priority, then creation) and what they wait for."""
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        async with runtime.store.read() as repos:
            records = await repos.executions.find(phases=_phases(phases), limit=limit)
            positions = await pending_positions(repos, records)
    finally:
        await runtime.close()
    if records and len(positions) == len(records):  # only PENDING ones: list them in order
        records.sort(key=lambda r: (r.launch_plan or "", positions[r.id]))
    if as_json:
        print_json([{**execution_json(r), "position": positions.get(r.id)} for r in records])
        return
    console = Console()
    console.print(executions_table(records, positions, runtime.clock.now(), console.width))


SHORT_ID = 8
"""Fewest characters of an id `executions ls` shows; more when a listed neighbour shares them."""


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least SHORT_ID characters that no other listed id
    starts with (the whole id when it is that short); `executions show` accepts it."""
    ordered = sorted(set(ids))
    shown = {}
    for i, execution_id in enumerate(ordered):
        neighbours = ordered[max(0, i - 1) : i] + ordered[i + 1 : i + 2]
        shared = max((_common_prefix(execution_id, n) for n in neighbours), default=0)
        shown[execution_id] = execution_id[: max(SHORT_ID, shared + 1)]
    return shown


def _common_prefix(a: str, b: str) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


def ago(timestamp: float | None, now: float) -> str:
    """`5s ago`, `3m ago`, `3h ago`, `2d ago`: how long before `now`."""
    if timestamp is None:
        return ""
    seconds = max(0, int(now - timestamp))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def executions_table(
    records: list[ExecutionRecord], positions: dict[str, int], now: float, width: int = 80
) -> Table:
    """One line per execution within `width` columns: long values are cut with an ellipsis
    (all of them are in `executions show`), never wrapped."""
    shown = short_ids([r.id for r in records])
    rows = [
        (
            shown[r.id],
            r.workflow_name,
            r.launch_plan or "",
            r.phase.value,
            str(positions[r.id]) if r.id in positions else "",
            ago(r.created_at, now),
            _last_line(r.reason),
        )
        for r in records
    ]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    widths = _column_widths(rows, width)
    for (column, _), size in zip(_LS_COLUMNS, widths, strict=True):
        table.add_column(column, no_wrap=True, overflow="ellipsis", width=size)
    for row in rows:
        table.add_row(*row)
    return table


def _column_widths(rows: Sequence[tuple[str, ...]], width: int) -> list[int]:
    """Each column as wide as its widest value up to its bound; the reason takes what is
    left of `width` (the box puts one space between columns)."""
    widths = [
        min(bound, max([len(name), *(len(row[i]) for row in rows)]))
        for i, (name, bound) in enumerate(_LS_COLUMNS[:-1])
    ]
    left = width - sum(widths) - (len(_LS_COLUMNS) - 1)
    return [*widths, max(_LS_COLUMNS[-1][1], left)]


_LS_COLUMNS = (
    ("id", 20),
    ("workflow", 14),
    ("launch plan", 14),
    ("phase", 9),
    ("pos", 3),
    ("created", 8),
    ("reason", 10),
)
"""Each column's name and widest (for the reason: narrowest) number of characters."""


async def pending_positions(repos: Repos, records: list[ExecutionRecord]) -> dict[str, int]:
    """Each PENDING execution's place (1 = next) in its launch plan name's queue, now."""
    queues = {
        (r.project, r.domain, r.launch_plan) for r in records if r.phase is ExecutionPhase.PENDING
    }
    positions: dict[str, int] = {}
    for project, domain, launch_plan in queues:
        order = await ConcurrencyRepository(repos.conn).pending_order(project, domain, launch_plan)
        positions.update({execution_id: i for i, execution_id in enumerate(order, 1)})
    listed = {r.id for r in records}
    return {k: v for k, v in positions.items() if k in listed}


def _node_json(node: NodeRecord) -> dict[str, object]:
    return {
        "node": node.node_id,
        "phase": node.phase.value,
        "task_phase": node_phase_label(node),
        "attempt": node.attempt,
        "reason": node.reason,
        "cache_status": node.cache_status.value,
        "reservation_status": node.reservation_status.value,
        "outputs": node.outputs,
        "error": node.error,
        "started_at": node.started_at,
        "ended_at": node.ended_at,
    }


_MATCHES_SHOWN = 10


async def _by_id_or_prefix(repos: Repos, text: str) -> ExecutionRecord:
    """The execution with this id, or the only one whose id starts with it (what `ls`
    shows); a prefix of several is an error naming them."""
    record = await repos.executions.get(text)
    if record is not None:
        return record
    table = schema.executions
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    query = (
        sa.select(table.c.id)
        .where(table.c.id.like(f"{escaped}%", escape="\\"))
        .order_by(table.c.id)
        .limit(_MATCHES_SHOWN + 1)
    )
    matches = [row[0] for row in await repos.conn.execute(query)]
    if not matches:
        raise NotFoundError(f"execution {text!r} does not exist")
    if len(matches) > 1:
        more = ", ..." if len(matches) > _MATCHES_SHOWN else ""
        listed = ", ".join(matches[:_MATCHES_SHOWN]) + more
        raise InvalidArgumentError(f"execution {text!r} is ambiguous, it matches: {listed}")
    found = await repos.executions.get(matches[0])
    assert found is not None
    return found


@executions.command("show")
@click.argument("execution_id")
@click.option("--events", "with_events", is_flag=True, help="Also list every recorded event.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def show(ctx: click.Context, execution_id: str, with_events: bool, as_json: bool) -> None:
    """One execution: phase, inputs, outputs, and each node's phase and reason."""
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        async with runtime.store.read() as repos:
            record = await _by_id_or_prefix(repos, execution_id)
            nodes = await repos.nodes.list(record.id)
            events = await repos.events.list(record.id) if with_events or as_json else []
    finally:
        await runtime.close()
    if as_json:
        print_json(
            {
                **execution_json(record),
                "nodes": [_node_json(n) for n in nodes],
                "events": [e.__dict__ for e in events],
            }
        )
        return
    print_execution(record, nodes, Console())
    if with_events:
        for e in events:
            who = f"node {e.node_id}" if e.node_id else "execution"
            click.echo(
                f"{iso(e.occurred_at)} {who} attempt {e.attempt + 1} {e.phase} "
                f"v{e.phase_version} {_last_line(e.reason)}"
            )


def print_execution(record: ExecutionRecord, nodes: list[NodeRecord], console: Console) -> None:
    """The execution, its inputs and outputs as JSON, its error as text (the message, then
    its traceback lines as they are), its nodes, then the errors of failed nodes not shown."""
    console.print(
        f"[bold]{escape(record.id)}[/] {escape(record.workflow_key)} "
        f"[bold]{record.phase.value}[/] {escape(record.reason)}",
        highlight=False,
    )
    console.print(f"inputs: {_json_text(record.inputs)}", highlight=False, markup=False)
    if record.outputs is not None:
        console.print(f"outputs: {_json_text(record.outputs)}", highlight=False, markup=False)
    if record.error:
        node = record.error.get("node")
        _print_error(console, f"error in node {node}" if node else "error", record.error)
    console.print(_nodes_table(nodes))
    for n in nodes:
        if n.error and not (record.error and record.error.get("node") == n.node_id):
            _print_error(console, f"node {n.node_id} failed", n.error)


def _json_text(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _print_error(console: Console, heading: str, error: dict[str, Any]) -> None:
    """`heading: CODE (KIND): last line of the message`, then the message's lines (a
    traceback) as they are when it has more than one."""
    message = str(error.get("message", ""))
    lines = message.strip("\n").splitlines()
    summary = f"{heading}: {error.get('code', '')} ({error.get('kind', '')}): {_last_line(message)}"
    console.print(summary, highlight=False, markup=False, soft_wrap=True)
    if len(lines) > 1:
        console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


def _nodes_table(nodes: list[NodeRecord]) -> Table:
    table = Table()
    for column in ("node", "phase", "attempt", "cache", "reason"):
        table.add_column(column, overflow="fold")
    for n in nodes:
        table.add_row(
            n.node_id,
            node_phase_label(n),
            str(n.attempt + 1),
            n.cache_status.value,
            _last_line(n.reason),
        )
    return table


_ABORT_TIMEOUT = 60.0
"""Seconds `executions abort` waits by default for the execution to end: long enough for a
dead owner's lease (30 s by default) to run out and this command's engine to finish the abort."""
_RECHECK = 1.0
"""Seconds between re-reads of the execution while waiting, should a notification be missed."""


@executions.command("abort")
@click.argument("execution_id")
@click.option("--reason", default="aborted by user", show_default=True)
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the execution has ended (ABORTED, or another terminal phase).",
)
@click.option(
    "--timeout",
    "seconds",
    type=float,
    default=_ABORT_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="With --wait: give up after this long, exit 1 and say it is still aborting.",
)
@click.pass_context
@run_async
async def abort(
    ctx: click.Context, execution_id: str, reason: str, wait: bool, seconds: float
) -> int:
    """Abort an execution: every active task is aborted and finalized.

    Returns as soon as the execution is terminal, whichever process drives it; with no live
    owner, this command's own engine takes the execution over once its lease runs out."""
    if not seconds > 0:
        raise InvalidArgumentError(f"--timeout {seconds}: must be a positive number of seconds")
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        record = await request_abort(
            runtime.store, runtime.notifier, runtime.clock, execution_id, reason
        )
        if wait and not record.phase.is_terminal:
            record = await _finish_abort(runtime, execution_id, seconds)
    finally:
        await runtime.close()
    if record.phase.is_terminal:
        click.echo(f"execution {record.id} ended {record.phase.value}")
        return 0
    if not wait:
        click.echo(f"abort of execution {record.id} requested ({record.phase.value})")
        return 0
    click.echo(
        f"execution {record.id} is still {record.phase.value} after {seconds:g}s; "
        f"its engine has not finished the abort (see `sluice executions show {record.id}`)",
        err=True,
    )
    return EXIT_FAILED


async def _finish_abort(runtime: Runtime, execution_id: str, seconds: float) -> ExecutionRecord:
    """The execution once terminal, or as it is after `seconds`.

    The owner may be another process, whose engine's end of the execution arrives here as a
    notification on the executions channel (re-read every second besides); with no live
    owner, the engine started here takes the execution over and finishes the abort."""
    changed = asyncio.Event()

    def on_change(payload: str) -> None:
        if payload in (execution_id, WAKE_ALL):
            changed.set()

    unsubscribe = runtime.notifier.subscribe(EXECUTIONS_CHANNEL, on_change)
    engine = await runtime.engine(only=[execution_id])
    await engine.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while True:
            changed.clear()  # before the read: a change after it sets the event again
            async with runtime.store.read() as repos:
                record = await repos.executions.get(execution_id)
            if record is None:
                raise NotFoundError(f"execution {execution_id!r} does not exist")
            remaining = deadline - loop.time()
            if record.phase.is_terminal or remaining <= 0:
                return record
            await wait_event(changed, min(remaining, _RECHECK))
    finally:
        unsubscribe()
        await engine.stop()


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""
