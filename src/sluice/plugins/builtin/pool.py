"""A local process pool for python tasks: `size` worker processes, one job at a time each.

Workers are plain subprocesses (`python -m sluice.plugins.builtin.worker`) speaking JSON lines
on a dedicated pipe pair, so their start-up costs one interpreter and the task's own imports.
A worker's stdout and stderr (file descriptors 1 and 2, so the output of C code and of
subprocesses too) are pipes the pool reads line by line and hands to the running job's
`on_output`: task output never reaches the engine's terminal. After each job the worker
writes a marker (random per worker) on both, and the job is done only once both markers are
read, so every line a job printed is delivered before its answer.

Unlike concurrent.futures' pool, a worker that dies fails only the job it was running (as a
retryable system error) and is replaced. A job is cancelled by killing the worker that runs
it: the only way to stop arbitrary Python code.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_LIMIT = 256 * 1024 * 1024  # longest JSON line accepted from a worker
_OUTPUT_CHUNK = 64 * 1024
"""Bytes read at once from a worker's stdout or stderr; a longer line without a newline is
delivered in pieces this size."""
_MARKER_WAIT = 5.0
"""Seconds an answered job waits for its output markers (they were written before the answer,
so only a subprocess of the task holding the pipe full delays them)."""
_STDERR_TAIL = 20
"""Lines of a job's stderr kept for its error message."""

OutputSink = Callable[[str, str], None]
"""(text, stream): one line a job printed on "stdout" or "stderr"."""


class WorkerDied(Exception):
    """The worker process running a job exited before answering."""


@dataclass
class Job:
    id: str
    payload: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    on_start: Callable[[], None] | None = None
    started: bool = False
    started_at: float | None = None
    on_output: OutputSink | None = None
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=_STDERR_TAIL)
    )

    def output(self, text: str, stream: str) -> None:
        if stream == "stderr":
            self.stderr_tail.append(text)
        if self.on_output is not None:
            self.on_output(text, stream)


class _Process:
    """One worker process and the two pipes to it."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        marker: bytes,
    ) -> None:
        self.process, self.reader, self.writer = process, reader, writer
        self.job: Job | None = None
        self._marker = marker
        self._ended = {"stdout": asyncio.Event(), "stderr": asyncio.Event()}
        self._pumps = [
            asyncio.create_task(self._pump(pipe, name), name=f"sluice-pool-{name}")
            for pipe, name in ((process.stdout, "stdout"), (process.stderr, "stderr"))
            if pipe is not None
        ]

    @classmethod
    async def spawn(cls) -> _Process:
        job_read, job_write = os.pipe()
        result_read, result_write = os.pipe()
        marker = f"\x1esluice-job-end-{secrets.token_hex(8)}\x1e"
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sluice.plugins.builtin.worker",
                str(job_read),
                str(result_write),
                str(os.getpid()),
                marker,
                pass_fds=(job_read, result_write),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=_OUTPUT_CHUNK,
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
        return cls(process, reader, writer, marker.encode())

    async def _pump(self, pipe: asyncio.StreamReader, stream: str) -> None:
        """Deliver each line the worker prints to the job it runs; note the job-end marker."""
        partial = b""
        while chunk := await pipe.read(_OUTPUT_CHUNK):
            *lines, partial = (partial + chunk).split(b"\n")
            if len(partial) >= _OUTPUT_CHUNK:
                lines.append(partial)
                partial = b""
            for line in lines:
                self._line(line, stream)
        if partial:
            self._line(partial, stream)
        self._ended[stream].set()  # the worker is gone: nothing more will come

    def _line(self, line: bytes, stream: str) -> None:
        before, marked, _ = line.partition(self._marker)
        if (before or not marked) and self.job is not None:
            self.job.output(before.decode(errors="replace"), stream)
        if marked:
            self._ended[stream].set()

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def call(self, job: Job) -> dict[str, Any]:
        self.job = job
        for ended in self._ended.values():
            ended.clear()
        try:
            self.writer.write(json.dumps({"id": job.id, **job.payload}).encode() + b"\n")
            await self.writer.drain()
            line = await self.reader.readline()
        except (ConnectionError, BrokenPipeError):
            line = b""
        await self._output_ended()
        self.job = None
        if not line:
            code = await self.process.wait()
            raise WorkerDied(
                f"worker process {self.process.pid} exited with code {code} while running the task"
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def _output_ended(self) -> None:
        if all(ended.is_set() for ended in self._ended.values()):
            return  # the usual case: both markers were read before the answer
        waits = [asyncio.ensure_future(e.wait()) for e in self._ended.values()]
        _, pending = await asyncio.wait(waits, timeout=_MARKER_WAIT)
        for wait in pending:
            wait.cancel()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def close(self) -> None:
        self.kill()
        self.writer.close()
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.process.wait()


class WorkerPool:
    """Jobs run first come, first served on up to `size` workers, started on first use."""

    def __init__(self, size: int, now: Callable[[], float] = time.time) -> None:
        self._size = size
        self._now = now
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._jobs: dict[str, Job] = {}
        self._running: dict[str, _Process] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._processes: set[_Process] = set()
        self._idle = 0
        """Workers waiting for a job."""
        self._starting = 0
        """Workers whose process is being spawned: each takes a job soon."""

    @property
    def size(self) -> int:
        return self._size

    @property
    def started(self) -> int:
        """Workers started so far (at most `size`)."""
        return len(self._workers)

    def submit(
        self,
        job_id: str,
        payload: dict[str, Any],
        on_start: Callable[[], None] | None = None,
        on_output: OutputSink | None = None,
    ) -> Job:
        """Queue a job; its future resolves to the worker's answer or raises WorkerDied.
        `on_start` is called when a worker takes the job, `on_output` with each line the job
        prints (all of them before the future resolves)."""
        future = asyncio.get_running_loop().create_future()
        job = Job(job_id, payload, future, on_start, on_output=on_output)
        self._jobs[job_id] = job
        self._queue.put_nowait(job)
        if self._queue.qsize() > self._idle + self._starting:
            self.start(len(self._workers) + 1)  # no worker free or on its way: one more
        return job

    def start(self, count: int | None = None) -> None:
        """Have `count` workers (every one by default) started now, so that they import in
        parallel. Beyond them, a worker is started when a job finds none free or starting:
        a run of one task, or of a chain, does not pay for processes it never uses."""
        wanted = self._size if count is None else min(count, self._size)
        while len(self._workers) < wanted:
            self._starting += 1
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
        try:
            process: _Process | None = await self._spawn()
        finally:
            self._starting -= 1
        while True:
            self._idle += 1
            try:
                job = await self._queue.get()
            finally:
                self._idle -= 1
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
        job.started, job.started_at = True, self._now()
        if job.on_start is not None:
            job.on_start()
        try:
            answer = await process.call(job)
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
