"""Backfills: the reprocess rules, one execution per slot with a deterministic id (running it
again creates nothing), the plan's policy and the backfill's cap together (judged from the
history), pause/resume/cancel, and the runner SIGKILLed mid-step and after a step."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from concurrency.cc_support import (
    TERMINAL,
    execution_events,
    load_flows,
    open_runtime,
    read_until,
    register,
    replay_max_active,
    spawn,
)
from sluice.executions.backfill_runner import BackfillRunner
from sluice.executions.backfills import plan_slots, slot_execution_id
from sluice.runtime import Runtime
from sluice.service import Sluice
from sluice.service.backfill_views import Backfill
from sluice.service.local import run_controller_candidate
from sluice.store.backfills import BackfillRecord, SlotRun
from sluice.store.records import EventRecord, ExecutionRecord

flows = load_flows()
PARIS = ZoneInfo("Europe/Paris")
DST_DAY = datetime(2026, 3, 29, 0, 0)  # 02:00 does not exist in Paris that night


def test_reprocess_rules_choose_each_slots_run() -> None:
    runs = [
        SlotRun(2.0, 0, "SUCCEEDED"),
        SlotRun(3.0, 0, "FAILED"),
        SlotRun(4.0, 0, "FAILED"),
        SlotRun(4.0, 1, "ABORTED"),
        SlotRun(5.0, 0, "RUNNING"),
    ]
    chosen = {}
    for reprocess in ("none", "failed", "all"):
        record = BackfillRecord("bf1", "p", "d", "lp", "v", 0, 9, reprocess, 3, "RUNNING", 0, 0, 0)
        planned = plan_slots(record, [1.0, 2.0, 3.0, 4.0, 5.0], runs)
        chosen[reprocess] = [(s.slot_at, s.generation) for s in planned]
        for slot in planned:
            assert slot.execution_id == slot_execution_id(
                "p", "d", "lp", slot.slot_at, slot.generation
            )
    assert chosen == {
        "none": [(1.0, 0)],
        "failed": [(1.0, 0), (3.0, 1), (4.0, 2)],
        "all": [(1.0, 0), (2.0, 1), (3.0, 1), (4.0, 2)],
    }
    assert slot_execution_id("p", "d", "lp", 1.0, 0) != slot_execution_id("p", "d", "lp", 1.0, 1)


def replay_max_open(events: list[EventRecord]) -> int:
    """The most executions that existed unfinished at once (created until ended): what a
    backfill's max_active bounds."""
    ordered = sorted(events, key=lambda e: (e.occurred_at, e.phase not in TERMINAL, e.id or 0))
    unfinished: set[str] = set()
    peak = 0
    for event in ordered:
        if event.phase in TERMINAL:
            unfinished.discard(event.execution_id)
        else:
            unfinished.add(event.execution_id)
            peak = max(peak, len(unfinished))
    return peak


async def slot_runs(rt: Runtime, backfill: Backfill) -> list[ExecutionRecord]:
    async with rt.store.read() as repos:
        found = await repos.executions.find(launch_plan="hourly", limit=None, oldest_first=True)
    start, end = backfill.start.timestamp(), backfill.end.timestamp()
    return [r for r in found if r.scheduled_at is not None and start <= r.scheduled_at <= end]


async def test_one_run_per_slot_again_nothing_new_then_reprocess(sqlite_url: str) -> None:
    async with open_runtime(sqlite_url) as rt:
        await register(rt, flows.hourly)
        backfills = Sluice(rt).backfills
        end = DST_DAY + timedelta(hours=5)
        first = await backfills.create("hourly", DST_DAY, end, max_active=3)
        assert (first.state, first.slots, first.progress) == ("RUNNING", 5, {"PLANNED": 5})
        done = await backfills.drive(first.id)
        runs = await slot_runs(rt, first)
        events = await execution_events(rt, [r.id for r in runs])
        again = await backfills.create("hourly", DST_DAY, end)
        reprocessed = await backfills.create("hourly", DST_DAY, DST_DAY, reprocess="all")
        await backfills.drive(reprocessed.id)
        after = await slot_runs(rt, first)
    local = [datetime.fromtimestamp(r.scheduled_at or 0, PARIS).hour for r in runs]
    assert local == [0, 1, 3, 4, 5], "cron slots in the schedule's time zone"
    assert (done.state, done.progress, done.ended) == ("DONE", {"SUCCEEDED": 5}, 5)
    assert [r.id for r in runs] == [
        slot_execution_id("default", "development", "hourly", r.scheduled_at or 0, 0) for r in runs
    ]
    assert replay_max_open(events) <= 3, "the backfill's cap"
    assert replay_max_active(events) <= 2, "the launch plan's policy"
    assert (again.state, again.slots) == ("DONE", 0)
    assert reprocessed.slots == 1
    assert len(after) == 6 and [r.slot_generation for r in after].count(1) == 1


async def test_pause_resume_and_cancel(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.hourly)
        backfills = Sluice(rt).backfills
        made = await backfills.create("hourly", DST_DAY, DST_DAY + timedelta(hours=3), max_active=1)
        runner = BackfillRunner(rt.store, rt.notifier, rt.clock)
        assert await runner.step_all() == 1  # no engine here: it stays unfinished
        assert await runner.step_all() == 0, "the cap: one unfinished at a time"
        paused = await backfills.pause(made.id)
        assert paused.state == "PAUSED" and await runner.step_all() == 0
        assert (await backfills.resume(made.id)).state == "RUNNING"
        cancelled = await backfills.cancel(made.id)
        assert await runner.step_all() == 0
        with pytest.raises(Exception, match="is CANCELLED"):
            await backfills.resume(made.id)
        retried = await backfills.create(
            "hourly", DST_DAY, DST_DAY + timedelta(hours=3), reprocess="failed"
        )
    assert cancelled.state == "CANCELLED"
    assert cancelled.progress == {"ABORTED": 1, "PLANNED": 2}
    assert retried.slots == 3, "the aborted slot runs again, the two never created run first"


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


async def wait_state(backfills: object, backfill_id: str, state: str, within: float) -> Backfill:
    deadline = time.monotonic() + within
    while True:
        found: Backfill = await backfills.get(backfill_id)  # type: ignore[attr-defined]
        if found.state == state:
            return found
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)


async def test_a_runner_sigkilled_mid_step_and_after_a_step_loses_and_doubles_nothing(
    sqlite_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(sqlite_url) as rt:
        await register(rt, flows.hourly)
        backfills = Sluice(rt).backfills
        made = await backfills.create(
            "hourly", DST_DAY, DST_DAY + timedelta(hours=12), max_active=3
        )
        engine = await rt.engine()
        await engine.start()
        try:
            async with run_controller_candidate(rt):
                for crash in ("backfill.mid_create:2", "backfill.after_create:2"):
                    proc = spawn("backfills", sqlite_url, crash)
                    processes.append(proc)
                    read_until(proc, "ready")
                    assert await asyncio.to_thread(proc.wait, 60) == -signal.SIGKILL
                processes.append(spawn("backfills", sqlite_url))
                done = await wait_state(backfills, made.id, "DONE", 120)
        finally:
            await engine.stop()
        runs = await slot_runs(rt, made)
        events = await execution_events(rt, [r.id for r in runs])
    assert done.progress == {"SUCCEEDED": made.slots} and made.slots == 12
    slots = [r.scheduled_at for r in runs]
    assert len(slots) == len(set(slots)) == 12, "each slot once, none lost"
    assert {r.id for r in runs} == {
        slot_execution_id("default", "development", "hourly", s or 0, 0) for s in slots
    }
    assert replay_max_open(events) <= 3
    assert replay_max_active(events) <= 2
