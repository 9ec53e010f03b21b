"""The local pool starts worker processes as jobs need them: a run of one task, or a chain
(one job at a time), uses one process; jobs queued at once start up to `size`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sluice.plugins.builtin.pool import WorkerDied, WorkerPool

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


CHATTY = """
import os
import sys

import sluice


@sluice.task
def chatty(n: int) -> int:
    for i in range(n):
        print(f"out {i}")
        print(f"err {i}", file=sys.stderr)
    os.write(1, b"no newline at the end")
    return n


@sluice.task
def big(text: str) -> int:
    return len(text)


@sluice.task
def die() -> int:
    print("about to die", file=sys.stderr, flush=True)
    os._exit(3)
"""


@pytest.fixture
def chatty_job(tmp_path: Path) -> Any:
    path = tmp_path / "pool_chatty.py"
    path.write_text(CHATTY)

    def job(qualname: str, **inputs: Any) -> dict[str, Any]:
        return {"module": "pool_chatty", "file": str(path), "qualname": qualname, "inputs": inputs}

    return job


async def test_every_line_a_job_printed_arrives_before_its_answer(chatty_job: Any) -> None:
    pool = WorkerPool(1)
    try:
        for n in (0, 3, 2000):  # nothing, a few lines, more than a pipe holds
            lines: list[tuple[str, str]] = []
            job = pool.submit(
                f"j{n}",
                chatty_job("chatty", n=n),
                on_output=lambda t, s, seen=lines: seen.append((s, t)),
            )
            job.future.add_done_callback(lambda _, seen=lines: seen.append(("end", "")))
            answer = await job.future
            assert answer == {"id": f"j{n}", "outputs": {"o0": n}}
            assert lines[-1] == ("end", "")
            printed = lines[:-1]
            assert [t for s, t in printed if s == "stdout"] == [
                *(f"out {i}" for i in range(n)),
                "no newline at the end",
            ]
            assert [t for s, t in printed if s == "stderr"] == [f"err {i}" for i in range(n)]
            pool.cancel(f"j{n}")
    finally:
        await pool.close()


async def test_a_job_longer_than_the_pipe_reaches_the_worker_whole(chatty_job: Any) -> None:
    pool = WorkerPool(1)
    try:
        text = "x" * (3 * 1024 * 1024)
        answer = await pool.submit("big", chatty_job("big", text=text)).future
        assert answer["outputs"] == {"o0": len(text)}
    finally:
        await pool.close()


async def test_a_dead_worker_fails_its_job_with_its_stderr_and_is_replaced(
    chatty_job: Any,
) -> None:
    pool = WorkerPool(1)
    try:
        job = pool.submit("d", chatty_job("die"))
        with pytest.raises(WorkerDied, match="exited with code 3"):
            await job.future
        assert list(job.stderr_tail) == ["about to die"]
        answer = await pool.submit("after", chatty_job("big", text="abc")).future
        assert answer["outputs"] == {"o0": 3}
    finally:
        await pool.close()


async def test_cancelling_a_running_job_kills_its_worker_only(chatty_job: Any) -> None:
    pool = WorkerPool(1)
    try:
        job = pool.submit("long", chatty_job("chatty", n=10**7))
        await asyncio.sleep(0.3)
        pool.cancel("long")
        assert job.future.cancelled()
        answer = await pool.submit("next", chatty_job("big", text="ab")).future
        assert answer["outputs"] == {"o0": 2}
    finally:
        await pool.close()


async def test_a_failing_done_callback_does_not_stop_the_worker(chatty_job: Any) -> None:
    pool = WorkerPool(1)

    def broken() -> None:
        raise RuntimeError("bad callback 7")

    try:
        first = pool.submit("first", chatty_job("big", text="a"), on_done=broken)
        second = pool.submit("second", chatty_job("big", text="bc"))
        assert (await first.future)["outputs"] == {"o0": 1}
        assert (await asyncio.wait_for(second.future, 30))["outputs"] == {"o0": 2}
    finally:
        await pool.close()
