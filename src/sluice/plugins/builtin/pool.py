"""A local process pool for python tasks: `size` worker processes, one job at a time each.

Workers are plain subprocesses (`python -m sluice.plugins.builtin.worker`) speaking JSON lines
on a dedicated pipe pair, so their start-up costs one interpreter and the task's own imports,
and the task's stdout stays the user's. Unlike concurrent.futures' pool, a worker that dies
fails only the job it was running (as a retryable system error) and is replaced. A job is
cancelled by killing the worker that runs it: the only way to stop arbitrary Python code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_LIMIT = 256 * 1024 * 1024  # longest JSON line accepted from a worker


class WorkerDied(Exception):
    """The worker process running a job exited before answering."""


@dataclass
class Job:
    id: str
    payload: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    on_start: Callable[[], None] | None = None
    started: bool = False


class _Process:
    """One worker process and the two pipes to it."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.process, self.reader, self.writer = process, reader, writer

    @classmethod
    async def spawn(cls) -> _Process:
        job_read, job_write = os.pipe()
        result_read, result_write = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sluice.plugins.builtin.worker",
                str(job_read),
                str(result_write),
                str(os.getpid()),
                pass_fds=(job_read, result_write),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            os.close(job_read)
            os.close(result_write)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_LIMIT)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(result_read, "rb", 0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(job_write, "wb", 0)
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(process, reader, writer)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def call(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            self.writer.write(json.dumps(message).encode() + b"\n")
            await self.writer.drain()
            line = await self.reader.readline()
        except (ConnectionError, BrokenPipeError):
            line = b""
        if not line:
            code = await self.process.wait()
            raise WorkerDied(
                f"worker process {self.process.pid} exited with code {code} while running the task"
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def close(self) -> None:
        self.kill()
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.process.wait()


class WorkerPool:
    """Jobs run first come, first served on up to `size` workers, started on first use."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._jobs: dict[str, Job] = {}
        self._running: dict[str, _Process] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._processes: set[_Process] = set()

    @property
    def size(self) -> int:
        return self._size

    def submit(
        self, job_id: str, payload: dict[str, Any], on_start: Callable[[], None] | None = None
    ) -> Job:
        """Queue a job; its future resolves to the worker's answer or raises WorkerDied.
        `on_start` is called when a worker takes the job."""
        job = Job(job_id, payload, asyncio.get_running_loop().create_future(), on_start)
        self._jobs[job_id] = job
        self._queue.put_nowait(job)
        self.start()
        return job

    def start(self) -> None:
        """Start every worker now (they import in parallel), rather than one per first job."""
        while len(self._workers) < self._size:
            self._workers.append(asyncio.create_task(self._work(), name="sluice-pool-worker"))

    def get(self, job_id: str) -> Job | None:
        """A job submitted and not yet forgotten (finished jobs stay until `cancel`)."""
        return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> None:
        """Forget a job: a queued one is skipped, a running one's worker is killed. Idempotent."""
        job = self._jobs.pop(job_id, None)
        if job is None:
            return
        process = self._running.get(job_id)
        if process is not None:
            process.kill()
        if not job.future.done():
            job.future.cancel()

    async def _work(self) -> None:
        process: _Process | None = await self._spawn()
        while True:
            job = await self._queue.get()
            if self._jobs.get(job.id) is not job or job.future.done():
                continue  # cancelled while queued
            if process is None or not process.alive:
                process = await self._spawn()
            process = await self._run(job, process)

    async def _spawn(self) -> _Process:
        process = await _Process.spawn()
        self._processes.add(process)
        return process

    async def _run(self, job: Job, process: _Process) -> _Process | None:
        self._running[job.id] = process
        job.started = True
        if job.on_start is not None:
            job.on_start()
        try:
            answer = await process.call({"id": job.id, **job.payload})
        except WorkerDied as exc:
            self._processes.discard(process)
            if not job.future.done():
                job.future.set_exception(exc)
            return None
        finally:
            self._running.pop(job.id, None)
        if not job.future.done():
            job.future.set_result(answer)
        return process

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker
        for process in list(self._processes):
            await process.close()
        for job in self._jobs.values():
            if not job.future.done():
                job.future.cancel()
        self._workers.clear()
        self._processes.clear()
        self._jobs.clear()
