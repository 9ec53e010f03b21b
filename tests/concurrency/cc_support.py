"""Helpers of the concurrency tests: settings, launching, and replaying the event log."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from sluice.concurrency.controller import ControllerOptions
from sluice.config import Settings, load_config
from sluice.executions.launch import create_execution
from sluice.executions.launch_plans import LaunchPlanService
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import TERMINAL_EXECUTION_PHASES, ExecutionPhase
from sluice.store.records import EventRecord, ExecutionRecord

HERE = Path(__file__).resolve().parent
FLOWS = HERE / "cc_flows.py"
PROC = HERE / "cc_proc.py"
TERMINAL = {p.value for p in TERMINAL_EXECUTION_PHASES}
FAST = dict(rescan_interval=3.0, standby_interval=0.2, reason_interval=0.3)


def fast_settings(url: str, **concurrency: Any) -> Settings:
    engine = {"workers": 2, "backoff_base": 0.05, "backoff_max": 0.2, "resync_interval": 2.0}
    return load_config(database_url=url, engine=engine, concurrency=concurrency)


def load_flows() -> ModuleType:
    return load_module("cc_flows", str(FLOWS))


@contextlib.asynccontextmanager
async def open_runtime(url: str, **concurrency: Any) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(fast_settings(url, **concurrency), upgrade=True)
    try:
        yield rt
    finally:
        await rt.close()


def fast_options(**changes: Any) -> ControllerOptions:
    return ControllerOptions(**{**FAST, **changes})


def service(rt: Runtime) -> LaunchPlanService:
    return LaunchPlanService(
        rt.store, rt.notifier, rt.clock, rt.settings.project, rt.settings.domain
    )


async def register(rt: Runtime, plan: Any, *, activate: bool = True) -> None:
    await service(rt).register(plan.spec, plan.workflow.spec, activate=activate)


async def launch_many(rt: Runtime, plan: Any, count: int, **inputs: Any) -> list[ExecutionRecord]:
    return [await rt.launch(plan, {"tag": str(i), **inputs}) for i in range(count)]


async def records(rt: Runtime, ids: Iterable[str]) -> dict[str, ExecutionRecord]:
    async with rt.store.read() as repos:
        found = await repos.executions.find(ids=list(ids), limit=None)
    return {r.id: r for r in found}


async def wait_until(
    rt: Runtime, ids: Iterable[str], done: Any, within: float = 60
) -> dict[str, ExecutionRecord]:
    """Poll the store until done(record) holds for every id; fails after `within` seconds
    (a hang guard, not a timing assertion)."""
    wanted = list(ids)
    deadline = time.monotonic() + within
    while True:
        found = await records(rt, wanted)
        if len(found) == len(wanted) and all(done(r) for r in found.values()):
            return found
        assert time.monotonic() < deadline, {i: r.phase for i, r in found.items()}
        await asyncio.sleep(0.05)


async def wait_terminal(
    rt: Runtime, ids: Iterable[str], within: float = 60
) -> dict[str, ExecutionRecord]:
    return await wait_until(rt, ids, lambda r: r.phase.is_terminal, within)


async def execution_events(rt: Runtime, ids: Iterable[str] | None = None) -> list[EventRecord]:
    """Execution-level events (not node events), in the order they were recorded."""
    async with rt.store.read() as repos:
        events = await repos.events.list()
    wanted = set(ids) if ids is not None else None
    return [e for e in events if not e.node_id and (wanted is None or e.execution_id in wanted)]


def replay_max_active(events: list[EventRecord]) -> int:
    """The most executions active at once, replaying the log in occurred_at order: active
    from QUEUED (or RUNNING) until a terminal event; at equal times an end comes first."""
    ordered = sorted(events, key=lambda e: (e.occurred_at, e.phase not in TERMINAL, e.id or 0))
    active: set[str] = set()
    peak = 0
    for event in ordered:
        if event.phase in TERMINAL:
            active.discard(event.execution_id)
        elif event.phase in ("QUEUED", "RUNNING"):
            active.add(event.execution_id)
            peak = max(peak, len(active))
    return peak


def replay_max_active_by(events: list[EventRecord], group: dict[str, str]) -> dict[str, int]:
    """`replay_max_active` per group (a concurrency key) of the executions in `group`."""
    keys = set(group.values())
    return {
        key: replay_max_active([e for e in events if group.get(e.execution_id) == key])
        for key in keys
    }


CUSTOMERS = ["acme"] * 4 + ["premium"] * 4 + ["solo"] * 2 + ["zed"] * 2
"""Keys of the keyed launch plan's executions (cc_flows.keyed), in creation order."""


async def launch_keyed(
    rt: Runtime, plan: Any, seconds: float, customers: list[str] = CUSTOMERS
) -> list[ExecutionRecord]:
    return [
        await rt.launch(plan, {"customer": customer, "seconds": seconds, "tag": str(i)})
        for i, customer in enumerate(customers)
    ]


def assert_keyed_history(
    events: list[EventRecord], made: list[ExecutionRecord], limits: dict[str, int], total: int
) -> None:
    """Judged from the events alone: each execution promoted once, each key under its max
    (`limits`, else 1) at every instant, all keys together under `total`."""
    group = {r.id: r.concurrency_key or "" for r in made}
    assert count_phase(events, "QUEUED") == dict.fromkeys(group, 1), "promoted once each"
    for key, peak in replay_max_active_by(events, group).items():
        assert peak <= limits.get(key, 1), f"key {key!r} had {peak} active at once"
    assert replay_max_active(events) <= total


def intervals(events: list[EventRecord]) -> dict[str, tuple[float, float]]:
    """Each execution's active interval: (first QUEUED or RUNNING, terminal)."""
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for e in sorted(events, key=lambda e: (e.occurred_at, e.id or 0)):
        if e.phase in ("QUEUED", "RUNNING"):
            start.setdefault(e.execution_id, e.occurred_at)
        elif e.phase in TERMINAL:
            end[e.execution_id] = e.occurred_at
    return {i: (start[i], end.get(i, float("inf"))) for i in start}


def queued_order(events: list[EventRecord]) -> list[str]:
    return [
        e.execution_id
        for e in sorted(events, key=lambda e: (e.occurred_at, e.id or 0))
        if e.phase == "QUEUED"
    ]


def count_phase(events: list[EventRecord], phase: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in events:
        if e.phase == phase:
            counts[e.execution_id] = counts.get(e.execution_id, 0) + 1
    return counts


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `python cc_proc.py ARGS` with its output on pipes."""
    return subprocess.Popen(
        [sys.executable, str(PROC), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )


def succeeded(record: ExecutionRecord) -> bool:
    return record.phase is ExecutionPhase.SUCCEEDED


async def launch_with_priority(
    rt: Runtime, plan: Any, priority: int, seconds: float, tag: str = ""
) -> ExecutionRecord:
    """Launch `plan` as a version of its name that differs only by priority (the ACTIVE
    version's policy governs it whatever its version)."""
    spec = plan.spec.model_copy(
        update={"priority": priority, "version": f"{plan.spec.version}-p{priority}"}
    )
    record = await create_execution(
        rt.store,
        rt.notifier,
        rt.clock,
        project=rt.settings.project,
        domain=rt.settings.domain,
        workflow=plan.workflow.spec,
        inputs={"seconds": seconds, "tag": tag},
        launch_plan=spec,
    )
    assert record is not None
    return record


def read_until(proc: subprocess.Popen[str], last: str) -> list[str]:
    """Lines `proc` prints up to (without) the line `last`."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        if line.strip() == last:
            return lines
        lines.append(line.strip())
    raise AssertionError(f"process ended (code {proc.wait()}) before printing {last!r}")
