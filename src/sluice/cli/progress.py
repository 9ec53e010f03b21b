"""Live progress of one execution: a table of nodes on a terminal, lines of events otherwise."""

from __future__ import annotations

import asyncio
import collections
import sys

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sluice.cancellation import wait_event
from sluice.service import Sluice
from sluice.service.models import Execution

_SHOWN = 25


def progress_table(execution: Execution) -> Group:
    """What one redraw shows: built from the execution as read for it, so every reason (queue
    positions included) is the one stored now; a PENDING execution has no nodes yet, so its
    own phase and reason say what it waits for."""
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


async def follow(
    service: Sluice, execution_id: str, done: asyncio.Event, interval: float = 0.25
) -> None:
    """Show progress until `done` is set."""
    if sys.stdout.isatty():
        await _follow_live(service, execution_id, done, interval)
    else:
        await _follow_lines(service, execution_id, done, interval)


async def _follow_live(
    service: Sluice, execution_id: str, done: asyncio.Event, interval: float
) -> None:
    console = Console()
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
