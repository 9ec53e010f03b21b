"""Races: 8 real processes reserve one key at once, on SQLite and PostgreSQL.

The processes play three rounds: a fresh key, a key whose
holder is alive, and a key whose holder stopped extending. After each claim every loser also
tries to release the key, which must change nothing.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.cache import Catalog, MemoryRepository, Reservation, open_repository
from sluice.clock import FakeClock
from sluice.config import CacheConfig

CONTENDERS = 8
T = 1_700_000_000.0
ROUNDS = [("fresh", T), ("held", T + 29.5), ("expired", T + 30.0)]
Report = tuple[Any, ...]
Race = Callable[[str], dict[str, list[Report]]]


@pytest.fixture(scope="module")
def race() -> Iterator[Race]:
    """CONTENDERS spawned processes, started once (spawning is the slow part) and given one
    job per race: play ROUNDS on a database URL."""
    here = str(Path(__file__).parent)
    sys.path.insert(0, here)  # spawned children copy sys.path and import the worker by name
    try:
        worker = importlib.import_module("_race_worker")
        ctx = multiprocessing.get_context("spawn")
        barrier, jobs, results = ctx.Barrier(CONTENDERS, timeout=120), ctx.Queue(), ctx.Queue()
        procs = [
            ctx.Process(target=worker.serve, args=(f"owner-{i}", jobs, barrier, results))
            for i in range(CONTENDERS)
        ]
        for proc in procs:
            proc.start()
    finally:
        sys.path.remove(here)

    def run(url: str) -> dict[str, list[Report]]:
        for _ in procs:
            jobs.put((url, ROUNDS))
        return _by_key([results.get(timeout=180) for _ in range(CONTENDERS * len(ROUNDS))])

    yield run
    for _ in procs:
        jobs.put(None)
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * CONTENDERS


def _by_key(reports: list[Report]) -> dict[str, list[Report]]:
    assert [r for r in reports if r[0] != "ok"] == []
    by_key: dict[str, list[Report]] = defaultdict(list)
    for report in reports:
        by_key[report[2]].append(report)
    return by_key


def _single_winner(reports: list[Report]) -> str:
    winners = [owner for _, owner, _, holder, _, _ in reports if holder == owner]
    assert len(winners) == 1, reports
    assert {holder for _, _, _, holder, _, _ in reports} == set(winners), reports
    assert not any(released for *_, released in reports), reports
    return str(winners[0])


async def test_real_processes_race_for_reservations(store_url: str, race: Race) -> None:
    repo = await open_repository(store_url, upgrade=True)
    try:
        for key in ("held", "expired"):
            holder = "alive" if key == "held" else "crashed"
            await repo.reservations.create(Reservation(key, holder, 10.0, T + 30), T)
        reports = await asyncio.to_thread(race, store_url)

        fresh = _single_winner(reports["fresh"])
        assert await repo.reservations.get("fresh") == Reservation("fresh", fresh, 10.0, T + 30)

        assert {r[3] for r in reports["held"]} == {"alive"}
        assert not any(r[5] for r in reports["held"])
        assert await repo.reservations.get("held") == Reservation("held", "alive", 10.0, T + 30)

        taker = _single_winner(reports["expired"])
        assert taker.startswith("owner-")
        assert await repo.reservations.get("expired") == Reservation("expired", taker, 10.0, T + 60)
    finally:
        await repo.close()


async def test_memory_backend_race_on_one_event_loop() -> None:
    catalog = Catalog(MemoryRepository(), clock=FakeClock(T), config=CacheConfig())
    owners = [f"owner-{i}" for i in range(CONTENDERS)]
    seen = await asyncio.gather(
        *(catalog.get_or_extend_reservation("k", owner, 10.0) for owner in owners)
    )
    assert len({r.owner_id for r in seen}) == 1
    assert seen[0].owner_id in owners
