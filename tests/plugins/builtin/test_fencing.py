"""Fencing of task bodies (sluice/fencing.py): the engine's lease deadline, and the watchdog in
each pool worker that ends a body once the deadline passes, even when the engine that should
have stopped it is frozen. Real worker processes; the deadline is moved by the test as a
frozen engine would leave it (never renewed)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.fencing import LeaseFence, read_deadline
from sluice.plugins.builtin.pool import WorkerFenced, WorkerPool

TASKS = """
import os
import time

import sluice


@sluice.task
def sleeper(seconds: float, marker: str) -> str:
    with open(marker, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(seconds)
    with open(marker + ".done", "w") as out:
        out.write("finished")
    return sluice.current_fencing_token() or ""
"""


@pytest.fixture
def job(tmp_path: Path) -> Any:
    path = tmp_path / "fenced_tasks.py"
    path.write_text(TASKS)

    def make(seconds: float, name: str, token: str = "") -> dict[str, Any]:
        inputs = {"seconds": seconds, "marker": str(tmp_path / name)}
        return {
            "module": "fenced_tasks",
            "file": str(path),
            "qualname": "sleeper",
            "inputs": inputs,
            "fencing_token": token,
        }

    return make


def test_the_deadline_is_the_earliest_proof_less_the_margin() -> None:
    now = [100.0]
    fence = LeaseFence(0.25, monotonic=lambda: now[0])
    assert fence.live() and fence.deadline == float("inf")  # nothing held, nothing to prove
    fence.proved("executions", 100.0, 8.0)
    fence.proved("tokens", 101.0, 4.0)
    assert fence.deadline == 104.0  # 101 + 4 x 0.75
    now[0] = 104.0
    assert not fence.live()
    fence.defer("x", "n")
    fence.proved("tokens", 104.0, 4.0)
    assert fence.deadline == 106.0 and fence.live()
    assert fence.restored() == {("x", "n")} and fence.restored() == set()
    fence.forget("executions")
    assert fence.deadline == 107.0
    with pytest.raises(ValueError, match="margin"):
        LeaseFence(1.5)


def test_the_shared_file_follows_the_deadline() -> None:
    fence = LeaseFence()
    try:
        path = fence.shared_file()
        import mmap

        with open(path, "rb") as f:
            view = mmap.mmap(f.fileno(), 16, prot=mmap.PROT_READ)
            assert read_deadline(view) == float("inf")
            fence.proved("executions", 10.0, 4.0)
            assert read_deadline(view) == 13.0
            view.close()
    finally:
        fence.close()
    assert not os.path.exists(path)


async def test_a_body_whose_engine_stops_renewing_is_ended_by_its_worker(
    job: Any, tmp_path: Path
) -> None:
    """The engine proves its leases once, then never again (frozen, or cut off): the worker
    ends the body at the deadline, on its own, and the job fails as fenced."""
    fence = LeaseFence(0.25)
    pool = WorkerPool(1, fence_file=fence.shared_file())
    try:
        fence.proved("executions", fence.now(), 4.0)  # deadline 3 s from now
        started = time.monotonic()
        running = pool.submit("j1", job(60.0, "body"))
        with pytest.raises(WorkerFenced):
            await asyncio.wait_for(running.future, 30)
        assert time.monotonic() - started < 30  # ended, not finished (a hang guard only)
        assert (tmp_path / "body").exists() and not (tmp_path / "body.done").exists()
        pid = int((tmp_path / "body").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        await pool.close()
        fence.close()


async def test_a_body_whose_engine_renews_runs_to_its_end(job: Any) -> None:
    fence = LeaseFence(0.25)
    pool = WorkerPool(1, fence_file=fence.shared_file())
    try:
        fence.proved("executions", fence.now(), 2.0)
        running = pool.submit("j1", job(3.0, "body", token="x1/n@4"))
        while not running.future.done():  # the engine's renewals, every 0.3 s
            fence.proved("executions", fence.now(), 2.0)
            await asyncio.sleep(0.3)
        answer = running.future.result()
        assert answer["outputs"] == {"o0": "x1/n@4"}  # the body saw its fencing token
    finally:
        await pool.close()
        fence.close()


async def test_a_job_that_arrives_past_the_deadline_is_not_started(
    job: Any, tmp_path: Path
) -> None:
    fence = LeaseFence(0.25)
    pool = WorkerPool(1, fence_file=fence.shared_file())
    try:
        pool.start(1)
        fence.proved("executions", fence.now() - 10.0, 4.0)  # long past
        answer = await asyncio.wait_for(pool.submit("j1", job(0.1, "body")).future, 60)
        assert answer.get("fenced") is True
        assert not (tmp_path / "body").exists()
    finally:
        await pool.close()
        fence.close()
