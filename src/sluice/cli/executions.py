"""`sluice executions ls|show|abort` (`create` is in cli/create.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sluice.cli.common import EXIT_FAILED, iso, opened, print_json, run_async
from sluice.errors import InvalidArgumentError
from sluice.service import ExecutionFilter, parse_phases
from sluice.service.models import Attempt, Execution, ExecutionSummary, NodeExecution
from sluice.spec.phases import ExecutionPhase
from sluice.spec.values import MAX_LIST_LIMIT, check_count


@click.group("executions")
def executions() -> None:
    """List, inspect, abort and create executions."""


@executions.command("ls")
@click.option("--phase", "phases", multiple=True, help="Only these phases (repeatable).")
@click.option("--launch-plan", help="Only executions of this launch plan.")
@click.option("--limit", default=50, show_default=True, type=int, help="At most this many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ls(
    ctx: click.Context,
    phases: tuple[str, ...],
    launch_plan: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Executions, newest first; PENDING ones with their position in their launch plan's
    queue (their key's, under a keyed policy; promotion order: priority, then creation) and
    what they wait for."""
    limit = check_count("--limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
    where = ExecutionFilter(phases=parse_phases(phases), launch_plan=launch_plan)
    async with opened(ctx) as service:
        records = (await service.executions(where, limit=limit)).items
        now = service.now()
    if records and all(r.position is not None for r in records):  # PENDING only: queue order
        records.sort(key=lambda r: (r.launch_plan or "", r.concurrency_key or "", r.position or 0))
    if as_json:
        print_json(records)
        return
    console = Console()
    console.print(executions_table(records, now, console.width))


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


def ago(when: datetime | float | None, now: float) -> str:
    """`5s ago`, `3m ago`, `3h ago`, `2d ago`: how long before `now`."""
    if when is None:
        return ""
    at = when.timestamp() if isinstance(when, datetime) else when
    seconds = max(0, int(now - at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def executions_table(records: list[ExecutionSummary], now: float, width: int = 80) -> Table:
    """One line per execution within `width` columns: long values are cut with an ellipsis
    (all of them are in `executions show`), never wrapped. A `key` column (the concurrency
    key; positions count within it) appears when some execution has one."""
    shown = short_ids([r.id for r in records])
    keyed = any(r.concurrency_key is not None for r in records)
    columns = _LS_COLUMNS if not keyed else (*_LS_COLUMNS[:3], ("key", 12), *_LS_COLUMNS[3:])
    rows = [
        (
            shown[r.id],
            r.workflow.rpartition("@")[0],
            r.launch_plan or "",
            *((r.concurrency_key or "",) if keyed else ()),
            r.phase,
            str(r.position) if r.position is not None else "",
            ago(r.created_at, now),
            _last_line(r.reason),
        )
        for r in records
    ]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    widths = _column_widths(rows, width, columns)
    for (column, _), size in zip(columns, widths, strict=True):
        table.add_column(column, no_wrap=True, overflow="ellipsis", width=size)
    for row in rows:
        table.add_row(*row)
    return table


def _column_widths(
    rows: Sequence[tuple[str, ...]], width: int, columns: Sequence[tuple[str, int]]
) -> list[int]:
    """Each column as wide as its widest value up to its bound; the reason takes what is
    left of `width` (the box puts one space between columns)."""
    widths = [
        min(bound, max([len(name), *(len(row[i]) for row in rows)]))
        for i, (name, bound) in enumerate(columns[:-1])
    ]
    left = width - sum(widths) - (len(columns) - 1)
    return [*widths, max(columns[-1][1], left)]


_LS_COLUMNS: tuple[tuple[str, int], ...] = (
    ("id", 20),
    ("workflow", 14),
    ("launch plan", 14),
    ("phase", 9),
    ("pos", 3),
    ("created", 8),
    ("reason", 10),
)
"""Each column's name and widest (for the reason: narrowest) number of characters."""


@executions.command("show")
@click.argument("execution_id")
@click.option("--events", "with_events", is_flag=True, help="Also list every recorded event.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def show(ctx: click.Context, execution_id: str, with_events: bool, as_json: bool) -> None:
    """One execution: phase, inputs, outputs, each node's phase and reason, and each
    attempt (start, end, phase, error, log size). ID may be a unique prefix."""
    async with opened(ctx) as service:
        found = await service.execution(execution_id, events=with_events or as_json)
    if as_json:
        print_json(found)
        return
    console = Console()
    print_execution(found, console)
    if with_events:
        for e in found.events:
            who = f"node {e.node_id}" if e.node_id else "execution"
            attempt = f" attempt {e.attempt}" if e.node_id else ""
            click.echo(
                f"{iso(e.occurred_at)} {who}{attempt} {e.phase} "
                f"v{e.phase_version} {_last_line(e.reason)}"
            )


def print_execution(found: Execution, console: Console) -> None:
    """The execution, its inputs and outputs as JSON, its error as text (the message, then
    its traceback lines as they are), its nodes and their attempts, then the errors of failed
    nodes not shown yet."""
    console.print(
        f"[bold]{escape(found.id)}[/] {escape(found.workflow)} "
        f"[bold]{found.phase}[/] {escape(found.reason)}",
        highlight=False,
    )
    console.print(f"inputs: {_json_text(found.inputs)}", highlight=False, markup=False)
    if found.outputs is not None:
        console.print(f"outputs: {_json_text(found.outputs)}", highlight=False, markup=False)
    if found.error:
        node = found.error.get("node")
        _print_error(console, f"error in node {node}" if node else "error", found.error)
    console.print(_nodes_table(found.nodes))
    if any(n.attempts for n in found.nodes):
        console.print(_attempts_table(found.nodes))
    for n in found.nodes:
        if n.error and not (found.error and found.error.get("node") == n.node):
            _print_error(console, f"node {n.node} failed", n.error)


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


def _nodes_table(nodes: list[NodeExecution]) -> Table:
    table = Table()
    for column in ("node", "phase", "attempt", "cache", "reason"):
        table.add_column(column, overflow="fold")
    for n in nodes:
        table.add_row(
            n.node, n.task_phase, str(n.attempt), n.cache_status, _last_line(n.live_reason)
        )
    return table


def _attempts_table(nodes: list[NodeExecution]) -> Table:
    """Every attempt of every node: when it ran, how it ended, its log's size."""
    table = Table(title="attempts", title_justify="left")
    for column in ("node", "attempt", "started (UTC)", "ended", "phase", "error", "log"):
        table.add_column(column, overflow="fold")
    for n in nodes:
        for a in n.attempts:
            table.add_row(
                n.node,
                str(a.attempt),
                iso(a.started_at)[-8:],
                iso(a.ended_at)[-8:],
                a.phase,
                _error_line(a),
                _size(a.log_bytes),
            )
    return table


def _error_line(attempt: Attempt) -> str:
    if not attempt.error:
        return ""
    return f"{attempt.error.get('code', '')}: {_last_line(str(attempt.error.get('message', '')))}"


def _size(count: int | None) -> str:
    if count is None:
        return ""
    for unit, size in (("MB", 1 << 20), ("kB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


_ABORT_TIMEOUT = 60.0
"""Seconds `executions abort` waits by default for the execution to end: long enough for a
dead owner's lease (30 s by default) to run out and this command's engine to finish the abort."""


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
    async with opened(ctx) as service:
        record = await service.abort(execution_id, reason, wait=wait, within=seconds)
    if ExecutionPhase(record.phase).is_terminal:
        click.echo(f"execution {record.id} ended {record.phase}")
        return 0
    if not wait:
        click.echo(f"abort of execution {record.id} requested ({record.phase})")
        return 0
    click.echo(
        f"execution {record.id} is still {record.phase} after {seconds:g}s; "
        f"its engine has not finished the abort (see `sluice executions show {record.id}`)",
        err=True,
    )
    return EXIT_FAILED


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""
