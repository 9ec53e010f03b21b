"""A worker started before the event loop (`sluice run` does, before its imports) is the first
worker a pool starts: it runs jobs as a spawned one does, dies as one does, and is killed when
no pool took it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.plugins.builtin import early_worker
from sluice.plugins.builtin.pool import WorkerDied, WorkerPool
from support.crash import alive as _alive

TASKS = """
import os
import sys

import sluice


@sluice.task
def whoami(i: int) -> int:
    print("line", i)
    print("err", i, file=sys.stderr)
    return os.getpid()
"""


@pytest.fixture
def payload(tmp_path: Path) -> Any:
    path = tmp_path / "early_tasks.py"
    path.write_text(TASKS)

    def job(i: int) -> dict[str, Any]:
        return {
            "module": "early_tasks",
            "file": str(path),
            "qualname": "whoami",
            "inputs": {"i": i},
        }

    return job


@pytest.fixture(autouse=True)
def no_worker_left() -> Iterator[None]:
    yield
    early_worker.discard_early_worker()


def _early_pid() -> int:
    assert early_worker._slot, "no early worker waiting"
    return early_worker._slot[0].popen.pid


async def test_the_first_worker_of_a_pool_is_the_early_one(payload: Any) -> None:
    early_worker.start_early_worker()
    pid = _early_pid()
    pool = WorkerPool(2)
    lines: list[tuple[str, str]] = []
    try:
        pool.start(1)
        job = pool.submit("j0", payload(0), on_output=lambda t, s: lines.append((t, s)))
        answer = await job.future
        assert answer["outputs"] == {"o0": pid}
        assert sorted(lines) == [("err 0", "stderr"), ("line 0", "stdout")]
        assert early_worker._slot == []  # adopted once: a second pool spawns its own
        assert pool.started == 1
    finally:
        await pool.close()
    assert not _alive(pid)


async def test_an_early_worker_killed_while_running_fails_its_job_and_is_replaced(
    payload: Any, tmp_path: Path
) -> None:
    slow = tmp_path / "slow_tasks.py"
    slow.write_text("import sluice, time\n\n@sluice.task\ndef nap() -> None:\n    time.sleep(30)\n")
    early_worker.start_early_worker()
    pid = _early_pid()
    pool = WorkerPool(1)
    try:
        job = pool.submit(
            "nap", {"module": "slow_tasks", "file": str(slow), "qualname": "nap", "inputs": {}}
        )
        while not job.started:
            await __import__("asyncio").sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerDied, match=f"worker process {pid} exited"):
            await job.future
        answer = await pool.submit("j1", payload(1)).future  # a new worker of its own
        assert answer["outputs"]["o0"] != pid
    finally:
        await pool.close()


async def test_an_early_worker_that_died_before_adoption_is_not_used(payload: Any) -> None:
    early_worker.start_early_worker()
    pid = _early_pid()
    os.kill(pid, signal.SIGKILL)
    early_worker._slot[0].popen.wait()
    pool = WorkerPool(1)
    try:
        answer = await pool.submit("j0", payload(0)).future
        assert answer["outputs"]["o0"] != pid
        assert early_worker._slot == []
    finally:
        await pool.close()


def test_a_worker_no_pool_took_is_killed_when_discarded() -> None:
    early_worker.start_early_worker()
    early_worker.start_early_worker()  # one at most
    assert len(early_worker._slot) == 1
    started = early_worker._slot[0]
    early_worker.discard_early_worker()
    assert started.popen.returncode is not None
    assert early_worker._slot == []
