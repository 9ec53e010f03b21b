"""The randomized SIGKILL loop: two engine processes drive a mixed workload (tasks that fail
and retry, tasks under quotas of 1 and 2, a serializable cached task shared by the executions
of a wave, lock-keyed tasks) while one of them, or both, are SIGKILLed at random moments and
restarted, at once or after their token leases lapsed. The history checker (history.py) then
judges what the task bodies really did, the store's events and the tables left.

CI mode runs the kills for about 25 s per backend (about 45 s with the drain and the checks);
SLUICE_SOAK_SECONDS=600 soaks longer, and SLUICE_SOAK_SEED replays a run's random choices. The
counts are printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from faults.harness import Engines, config, records, runtime, verdict, workload
from sluice.runtime import Runtime

flows = workload()
SECONDS = float(os.environ.get("SLUICE_SOAK_SECONDS", "25"))
MAX_ACTIVE = 6  # executions in flight at once; more only queue behind the quota of 1


async def _active(rt: Runtime, ids: list[str]) -> int:
    return sum(not r.phase.is_terminal for r in (await records(rt, ids)).values())


async def kill_loop(url: str, tmp_path: Path, backend: str) -> None:
    seed = int(os.environ.get("SLUICE_SOAK_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    history = tmp_path / "history.jsonl"
    cfg = config()
    ids: list[str] = []
    async with runtime(url, cfg) as rt:
        engines = Engines(url, tmp_path / "logs", cfg)
        try:
            pair = [await asyncio.to_thread(engines.start) for _ in range(2)]
            wave = 0
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                if await _active(rt, ids) < MAX_ACTIVE:
                    wave += 1  # a new cache key, its body sometimes outliving a reservation
                    cache_seconds = round(rng.uniform(1.0, 4.5), 3) + wave / 1e6
                    for _ in range(2):
                        inputs = {
                            "history": str(history),
                            "tag": len(ids),
                            "p": rng.randrange(3),
                            "cache_seconds": cache_seconds,
                        }
                        ids.append((await rt.launch(flows.mixed, inputs)).id)
                await asyncio.sleep(rng.uniform(0.3, 2.5))
                # Kill one engine (the other takes its executions over at once) or both; restart
                # at once or after the token leases (1.5 s) lapsed.
                victims = [0, 1] if rng.random() < 0.3 else [rng.randrange(2)]
                for victim in victims:
                    await asyncio.to_thread(engines.kill, pair[victim])
                await asyncio.sleep(rng.choice([0.0, rng.uniform(0.2, 1.0), rng.uniform(1.6, 3)]))
                for victim in victims:
                    pair[victim] = await asyncio.to_thread(engines.start)
            report = await verdict(rt, engines, history, ids, within=180)
        finally:
            engines.stop_all()
    print(
        f"\nkill loop on {backend} (seed {seed}): kills={engines.kills} executions={len(ids)} "
        f"bodies={report.bodies} reruns_at_kills={report.reruns_at_kills} "
        f"restarts_after_stops={report.restarts_after_stops} violations={len(report.violations)}"
    )
    for violation in report.violations:
        print("violation:", violation)
    assert report.violations == [], report.violations[:10]
    assert engines.kills > 0 and len(ids) > 0


@pytest.mark.slow
async def test_random_sigkills_on_sqlite(sqlite_url: str, tmp_path: Path) -> None:
    await kill_loop(sqlite_url, tmp_path, "sqlite")


@pytest.mark.slow
@pytest.mark.postgres
async def test_random_sigkills_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    await kill_loop(pg_url, tmp_path, "postgresql")
