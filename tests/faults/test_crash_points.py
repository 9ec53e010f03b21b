"""Each named engine crash point (sluice.faults.POINTS): a real engine process SIGKILLs itself
there by the hook its own script installs, a new engine without the hook takes over, and the
history checker (history.py) says whether the invariants held over what the task bodies
really did, not only over the end state.

Two executions of `lifecycle` with the same inputs: a serializable cached task (one computes,
the other waits and hits), then a task under the quota of 1, so every point is reached.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from faults.harness import Engines, config, runtime, verdict, workload
from sluice.faults import POINTS

ENGINE_POINTS = [p for p in POINTS if p.startswith("engine.")]
NTH = {"engine.after_persist": 3}  # the first passes commit before any task starts
flows = workload()


async def crash_at(url: str, tmp_path: Path, point: str) -> None:
    history = tmp_path / "history.jsonl"
    cfg = config()
    async with runtime(url, cfg) as rt:
        ids = [
            (await rt.launch(flows.lifecycle, {"history": str(history), "seconds": 0.4})).id
            for _ in range(2)
        ]
        engines = Engines(url, tmp_path / "logs", cfg)
        try:
            first = await asyncio.to_thread(engines.start, f"{point}:{NTH.get(point, 1)}")
            await engines.crashed(first)
            await asyncio.to_thread(engines.start)
            report = await verdict(rt, engines, history, ids)
        finally:
            engines.stop_all()
    print(f"{point}: {report.summary()} peaks={report.peaks}")
    assert report.violations == []
    assert report.bodies >= 2  # the cached task once, the quota task twice at least


def test_every_engine_point_is_covered() -> None:
    assert len(ENGINE_POINTS) == 8


@pytest.mark.parametrize("point", ENGINE_POINTS)
async def test_sigkill_at_engine_point_on_sqlite(
    sqlite_url: str, tmp_path: Path, point: str
) -> None:
    await crash_at(sqlite_url, tmp_path, point)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "point", ["engine.after_claim", "engine.after_reserve", "engine.after_put"]
)
async def test_sigkill_at_engine_point_on_postgresql(
    pg_url: str, tmp_path: Path, point: str
) -> None:
    await crash_at(pg_url, tmp_path, point)
