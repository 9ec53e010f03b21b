"""Live progress of one execution: a table of nodes on a terminal, lines of events otherwise.

rich is imported only for a terminal: a run in a script or CI (lines) does not load it.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from typing import TYPE_CHECKING

from sluice.cancellation import wait_event
from sluice.service import Sluice
from sluice.service.models import Execution

if TYPE_CHECKING:
    from rich.console import Console, Group

_SHOWN = 25


def progress_table(execution: Execution) -> Group:
    """What one redraw shows: built from the execution as read for it, so every reason (queue
    positions included) is the one stored now; a PENDING execution has no nodes yet, so its
    own phase and reason say what it waits for."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    nodes = execution.nodes
    counts = collections.Counter(n.task_phase for n in nodes)
    summary = ", ".join(f"{label} {count}" for label, count in sorted(counts.items()))
    title = f"execution {execution.id} {execution.phase}"
    if execution.phase == "PENDING" and execution.reason:
        title += f": {execution.reason}"
    table = Table()
    for column in ("node", "phase", "attempt", "reason"):
        table.add_column(column, overflow="fold")
    active = [n for n in nodes if n.ended_at is None] or nodes
    recent = sorted(active, key=lambda n: n.updated_at.timestamp() if n.updated_at else 0.0)
    for node in list(reversed(recent))[:_SHOWN]:
        table.add_row(node.node, node.task_phase, str(node.attempt), node.live_reason)
    if len(active) > _SHOWN:
        table.caption = f"... and {len(active) - _SHOWN} more"
    heading = Text(f"{title} ({summary})" if summary else title)
    return Group(heading, table)


class TaskOutput:
    """What tasks print while `sluice run` shows progress, each line prefixed with its node:
    on a terminal, printed through the live display's console, so it scrolls above the table
    instead of tearing through it; otherwise plain lines, a task's stderr on stderr."""

    def __init__(self, console: Console | None) -> None:
        self.console = console
        """The live display's console on a terminal; None: plain lines."""

    def __call__(self, node: str, attempt: int, stream: str, text: str) -> None:
        if self.console is not None:
            from rich.text import Text

            prefix = Text(f"{node} | ", style="cyan")
            body = Text(text, style="red" if stream == "stderr" else "")
            self.console.print(prefix + body, highlight=False, soft_wrap=True)
            return
        out = sys.stderr if stream == "stderr" else sys.stdout
        print(f"{node} | {text}", file=out, flush=True)


def task_output() -> TaskOutput:
    """Where task output goes: a console for the live table when stdout is a terminal."""
    if not sys.stdout.isatty():
        return TaskOutput(None)
    from rich.console import Console

    return TaskOutput(Console())


async def follow(
    service: Sluice,
    execution_id: str,
    done: asyncio.Event,
    interval: float = 0.25,
    output: TaskOutput | None = None,
) -> None:
    """Show progress until `done` is set (above it on a terminal: `output`'s lines)."""
    if sys.stdout.isatty():
        from rich.console import Console

        console = output.console if output is not None and output.console else Console()
        await _follow_live(service, execution_id, done, interval, console)
    else:
        await _follow_lines(service, execution_id, done, interval)


async def _follow_live(
    service: Sluice, execution_id: str, done: asyncio.Event, interval: float, console: Console
) -> None:
    from rich.live import Live

    with Live(console=console, refresh_per_second=8, transient=False) as live:
        while True:
            live.update(progress_table(await service.execution(execution_id)), refresh=True)
            if done.is_set():
                return
            await _pause(done, interval)


async def _follow_lines(
    service: Sluice, execution_id: str, done: asyncio.Event, interval: float
) -> None:
    last = 0
    while True:
        events = await service.events(execution_id, after=last)
        for event in events:
            last = event.id or last
            who = f"node {event.node_id}" if event.node_id else "execution"
            reason = f": {event.reason.splitlines()[-1]}" if event.reason.strip() else ""
            attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            print(f"{who}{attempt} {event.phase}{reason}", flush=True)
        if done.is_set() and not events:
            return
        await _pause(done, interval)


async def _pause(done: asyncio.Event, interval: float) -> None:
    await wait_event(done, interval)
