"""The local pool starts worker processes as jobs need them: a run of one task, or a chain
(one job at a time), uses one process; jobs queued at once start up to `size`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sluice.plugins.builtin.pool import WorkerPool

TASKS = """
import sluice


@sluice.task
def double(i: int) -> int:
    return 2 * i
"""


@pytest.fixture
def payload(tmp_path: Path) -> Any:
    path = tmp_path / "pool_tasks.py"
    path.write_text(TASKS)

    def job(i: int) -> dict[str, Any]:
        return {"module": "pool_tasks", "file": str(path), "qualname": "double", "inputs": {"i": i}}

    return job


async def test_jobs_one_at_a_time_use_one_worker(payload: Any) -> None:
    pool = WorkerPool(3)
    try:
        pool.start(1)
        for i in range(5):
            answer = await pool.submit(f"j{i}", payload(i)).future
            assert answer["outputs"] == {"o0": 2 * i}
            pool.cancel(f"j{i}")
        assert pool.started == 1
    finally:
        await pool.close()


async def test_jobs_queued_at_once_start_every_worker(payload: Any) -> None:
    pool = WorkerPool(2)
    try:
        jobs = [pool.submit(f"j{i}", payload(i)) for i in range(6)]
        answers = await asyncio.gather(*(job.future for job in jobs))
        assert [a["outputs"] for a in answers] == [{"o0": 2 * i} for i in range(6)]
        assert pool.started == 2
    finally:
        await pool.close()


async def test_start_without_a_count_starts_every_worker(payload: Any) -> None:
    pool = WorkerPool(2)
    try:
        pool.start()
        assert pool.started == 2
        assert (await pool.submit("j", payload(1)).future)["outputs"] == {"o0": 2}
    finally:
        await pool.close()
