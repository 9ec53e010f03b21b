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
from sluice.plugins.core.phase import Phase
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.records import ExecutionRecord, NodeRecord
from sluice.store.store import Store

_SHOWN = 25


def node_phase_label(node: NodeRecord) -> str:
    if node.phase is NodePhase.RUNNING:
        return Phase(node.task_phase).name if node.task_phase else "STARTING"
    return node.phase.value


def progress_table(execution: ExecutionRecord, nodes: list[NodeRecord]) -> Group:
    """What one redraw shows: built from the records as read for it, so every reason (queue
    positions included) is the one stored now; a PENDING execution has no nodes yet, so its
    own phase and reason say what it waits for."""
    counts = collections.Counter(node_phase_label(n) for n in nodes)
    summary = ", ".join(f"{label} {count}" for label, count in sorted(counts.items()))
    title = f"execution {execution.id} {execution.phase.value}"
    if execution.phase is ExecutionPhase.PENDING and execution.reason:
        title += f": {execution.reason}"
    table = Table()
    for column in ("node", "phase", "attempt", "reason"):
        table.add_column(column, overflow="fold")
    active = [n for n in nodes if not n.phase.is_terminal] or nodes
    for node in sorted(active, key=lambda n: n.updated_at, reverse=True)[:_SHOWN]:
        table.add_row(node.node_id, node_phase_label(node), str(node.attempt + 1), node.reason)
    if len(active) > _SHOWN:
        table.caption = f"... and {len(active) - _SHOWN} more"
    heading = Text(f"{title} ({summary})" if summary else title)
    return Group(heading, table)


async def follow(
    store: Store, execution_id: str, done: asyncio.Event, interval: float = 0.25
) -> None:
    """Show progress until `done` is set."""
    if sys.stdout.isatty():
        await _follow_live(store, execution_id, done, interval)
    else:
        await _follow_lines(store, execution_id, done, interval)


async def _follow_live(
    store: Store, execution_id: str, done: asyncio.Event, interval: float
) -> None:
    console = Console()
    with Live(console=console, refresh_per_second=8, transient=False) as live:
        while True:
            async with store.read() as repos:
                execution = await repos.executions.get(execution_id)
                nodes = await repos.nodes.list(execution_id)
            if execution is not None:
                live.update(progress_table(execution, nodes), refresh=True)
            if done.is_set():
                return
            await _pause(done, interval)


async def _follow_lines(
    store: Store, execution_id: str, done: asyncio.Event, interval: float
) -> None:
    last = 0
    while True:
        async with store.read() as repos:
            events = await repos.events.list(execution_id, after_id=last)
        for event in events:
            last = event.id or last
            who = f"node {event.node_id}" if event.node_id else "execution"
            reason = f": {event.reason.splitlines()[-1]}" if event.reason.strip() else ""
            attempt = f" (attempt {event.attempt + 1})" if event.attempt else ""
            print(f"{who}{attempt} {event.phase}{reason}", flush=True)
        if done.is_set() and not events:
            return
        await _pause(done, interval)


async def _pause(done: asyncio.Event, interval: float) -> None:
    await wait_event(done, interval)
