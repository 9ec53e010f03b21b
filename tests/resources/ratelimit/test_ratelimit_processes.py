"""Real processes on the shared backends (SQLite, PostgreSQL, Redis), judged on the store's
own clock:

- a race of 16 processes admitting against one limit: no window of the limit's period ever
  holds more admissions than the limit, judged from the callers' own timestamps;
- processes SIGKILLed right after the store judged an admission, and at random moments, then
  restarted: every unit of a spent budget went to exactly one token (nothing counted twice,
  nothing lost), the restarted ones asking again with the token they died asking with.

Figures are printed; run with -s to see them.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sluice.store.database import Database

PROCESSES = 16
RATE, LIMIT, PERIOD = "20/s, burst 5", 20, 1.0
CONTENTION = 2.0  # seconds every process keeps asking
BUDGET = "40/hour, burst 40"  # all of it at once, then nothing for an hour: a counter
SPENDERS, KILLED_AT = 8, {1: 2, 3: 3, 5: 4}  # worker -> the admission it dies right after
SHOT = (6, 7)  # workers the test SIGKILLs at a random moment


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # Spawned children copy sys.path, so they import the worker module by the same name.
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return importlib.import_module("_ratelimit_worker")


def prepare(location: Any) -> None:
    """Create and migrate a SQLite file once, before the children open it together."""
    if location.name == "sqlite":
        asyncio.run(_open_and_close(location.url))


async def _open_and_close(url: str) -> None:
    db = await Database.open(url)
    await db.close()


def most_in_a_window(spans: list[tuple[int, int]], period: float) -> int:
    """The most admissions certainly inside one window of `period`: each admission happened
    somewhere in its (asked, answered) span, so a group of spans all within less than
    `period` of one another is a group of admissions within one window, whatever the exact
    instants were. Spans are in ns."""
    spans = sorted(spans)
    width = int(period * 1e9)
    best = 0
    for i, (start, _) in enumerate(spans):
        inside = sum(1 for b, a in spans[i:] if a < start + width)
        best = max(best, inside)
    return best


@pytest.mark.slow
def test_16_processes_never_exceed_the_limit_in_any_window(
    shared_location: Any, worker: ModuleType
) -> None:
    prepare(shared_location)
    ctx = multiprocessing.get_context("fork")  # children start in ms: the race is what is timed
    barrier, results = ctx.Barrier(PROCESSES, timeout=120), ctx.Queue()
    args = (shared_location.url, shared_location.key_prefix, RATE)
    procs = [
        ctx.Process(target=worker.race, args=(*args, i, CONTENTION, barrier, results))
        for i in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    spans: list[tuple[int, int]] = []
    refusals = 0
    for _ in range(PROCESSES):
        status, index, payload, refused = results.get(timeout=300)
        assert status == "ok", f"process {index} failed: {payload}"
        spans.extend(payload)
        refusals += refused
    for proc in procs:
        proc.join(timeout=60)
    most = most_in_a_window(spans, PERIOD)
    print(
        f"\n[ratelimit race] {shared_location.name}: {PROCESSES} processes, {RATE}: "
        f"{len(spans)} admissions, {refusals} refusals, most in any {PERIOD:g} s window {most}"
    )
    assert refusals > len(spans)  # really contended
    assert len(spans) > LIMIT  # long enough for windows to fill
    assert most <= LIMIT


@pytest.mark.slow
def test_killed_processes_neither_double_count_nor_lose_a_unit(
    shared_location: Any, worker: ModuleType, tmp_path: Path
) -> None:
    prepare(shared_location)
    ctx = multiprocessing.get_context("fork")
    args = (shared_location.url, shared_location.key_prefix, BUDGET)
    journals = [tmp_path / f"w{i}.journal" for i in range(SPENDERS)]
    barrier = ctx.Barrier(SPENDERS + 1, timeout=120)  # the test shoots once all are there
    procs = [
        ctx.Process(
            target=worker.spend,
            args=(*args, str(journals[i]), KILLED_AT.get(i, 0), 0.05, barrier),
        )
        for i in range(SPENDERS)
    ]
    for proc in procs:
        proc.start()
    barrier.wait()
    time.sleep(random.uniform(0.0, 0.2))
    for i in SHOT:  # mid-flight, wherever they are: before, inside or after an admission
        if procs[i].pid is not None:
            os.kill(procs[i].pid, signal.SIGKILL)
    for proc in procs:
        proc.join(timeout=120)
    killed = [i for i, proc in enumerate(procs) if proc.exitcode == -signal.SIGKILL]
    assert set(KILLED_AT) <= set(killed), [p.exitcode for p in procs]
    # Restart the dead ones: each first asks again with the token it died asking with.
    again = [
        ctx.Process(target=worker.spend, args=(*args, str(journals[i]), 0, 0.0, None))
        for i in killed
    ]
    for proc in again:
        proc.start()
    for proc in again:
        proc.join(timeout=120)
    assert [p.exitcode for p in again] == [0] * len(again)

    granted, repeated = _granted(journals)
    print(
        f"\n[ratelimit kill] {shared_location.name}: {len(killed)} processes killed, "
        f"{len(granted)} distinct tokens granted of a budget of 40, {repeated} granted again "
        "without counting"
    )
    # Every unit went to exactly one token that knows it: a re-asked token counted twice
    # would leave fewer than 40, a lost admission would let more than 40 through.
    assert len(granted) == 40
    # The processes killed right after the store judged their admission asked again and were
    # answered "granted before", not granted a second unit.
    assert repeated >= len(KILLED_AT)


def _granted(journals: list[Path]) -> tuple[set[str], int]:
    granted: set[str] = set()
    repeated = 0
    for journal in journals:
        for line in journal.read_text().splitlines():
            if line.startswith("granted "):
                _, token, again = line.split(" ")
                assert token not in granted or again == "1", f"{token} granted twice"
                granted.add(token)
                repeated += int(again)
    return granted, repeated
