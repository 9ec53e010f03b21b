"""A local process pool for python tasks: `size` worker processes, one job at a time each.

Workers are plain subprocesses (`python -m sluice.plugins.builtin.worker`) speaking JSON lines
on a dedicated pipe pair, so their start-up costs one interpreter and the task's own imports.
A worker's stdout and stderr (file descriptors 1 and 2, so the output of C code and of
subprocesses too) are pipes the pool reads line by line and hands to the running job's
`on_output`: task output never reaches the engine's terminal.

Every line a job printed is delivered before its answer. After a job the worker flushes its
buffers and looks at its two output pipes: one the pool has drained entirely (the common case,
a job that printed nothing, or whose lines were already read) needs nothing more; on one still
holding bytes it writes a marker (random per worker), and the job is done only once that
marker is read. The answer says which markers follow.

The pool works from the event loop's callbacks, with no task per job: a job is written to an
idle worker as it is submitted, and its answer completes it in the callback that reads it,
which also reads whatever else the worker wrote meanwhile (one loop wake-up per job in the
common case). Unlike concurrent.futures' pool, a worker that dies fails only the job it was
running (as a retryable system error) and is replaced. A job is cancelled by killing the
worker that runs it: the only way to stop arbitrary Python code.

With a `fence_file` (the engine's lease deadline, sluice/fencing.py), every job names it: the
worker's watchdog ends a body whose engine's deadline passed (WorkerFenced), and refuses to
start one past it (the answer says "fenced").
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.fencing import FENCED_EXIT
from sluice.plugins.builtin.early_worker import adopt_early_worker, job_end_marker
from sluice.plugins.builtin.worker_process import WorkerProcess

log = logging.getLogger(__name__)
_STDERR_TAIL = 20
"""Lines of a job's stderr kept for its error message."""

OutputSink = Callable[[str, str], None]
"""(text, stream): one line a job printed on "stdout" or "stderr"."""


class WorkerDied(Exception):
    """The worker process running a job exited before answering."""


class WorkerFenced(WorkerDied):
    """The worker's watchdog ended the job: its engine could not show its leases alive."""


@dataclass
class Job:
    id: str
    payload: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    on_start: Callable[[], None] | None = None
    started: bool = False
    started_at: float | None = None
    on_output: OutputSink | None = None
    on_done: Callable[[], None] | None = None
    """Called as the future resolves (in the same callback, not a loop turn later)."""
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=_STDERR_TAIL)
    )

    def output(self, text: str, stream: str) -> None:
        if stream == "stderr":
            self.stderr_tail.append(text)
        if self.on_output is not None:
            self.on_output(text, stream)


class WorkerPool:
    """Jobs run first come, first served on up to `size` workers, started on first use."""

    def __init__(
        self, size: int, now: Callable[[], float] = time.time, fence_file: str | None = None
    ) -> None:
        self._size = size
        self._now = now
        self._fence = fence_file
        self._queue: collections.deque[Job] = collections.deque()
        self._jobs: dict[str, Job] = {}
        self._running: dict[str, WorkerProcess] = {}
        self._processes: set[WorkerProcess] = set()
        self._idle: list[WorkerProcess] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._started = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def started(self) -> int:
        """Worker slots started so far (at most `size`; a replaced worker keeps its slot)."""
        return self._started

    def submit(
        self,
        job_id: str,
        payload: dict[str, Any],
        on_start: Callable[[], None] | None = None,
        on_output: OutputSink | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Job:
        """Queue a job; its future resolves to the worker's answer or raises WorkerDied.
        `on_start` is called when a worker takes the job, `on_output` with each line the job
        prints (all of them before the future resolves), `on_done` as the future resolves."""
        future = asyncio.get_running_loop().create_future()
        job = Job(job_id, payload, future, on_start, on_output=on_output, on_done=on_done)
        self._jobs[job_id] = job
        while self._idle:
            process = self._idle.pop()
            if process.alive:
                self._dispatch(process, job)
                return job
            self._processes.discard(process)  # died while idle
        self._queue.append(job)
        if len(self._queue) > len(self._starting):
            self._spawn()  # no worker free or on its way: one more
        return job

    def start(self, count: int | None = None) -> None:
        """Have `count` workers (every one by default) started now, so that they import in
        parallel. Beyond them, a worker is started when a job finds none free or starting:
        a run of one task, or of a chain, does not pay for processes it never uses."""
        wanted = self._size if count is None else min(count, self._size)
        while len(self._processes) + len(self._starting) < wanted:
            if not self._spawn():
                return

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

    def cancel_where(self, prefix: str) -> None:
        """Forget every job whose id starts with `prefix` (see `cancel`)."""
        for job_id in [i for i in self._jobs if i.startswith(prefix)]:
            self.cancel(job_id)

    def _spawn(self) -> bool:
        """Start one more worker if the pool has room; False when it is full."""
        if len(self._processes) + len(self._starting) >= self._size:
            return False
        task = asyncio.get_running_loop().create_task(self._start_one(), name="sluice-pool-spawn")
        self._starting.add(task)
        self._started = min(
            self._size, max(self._started, len(self._processes) + len(self._starting))
        )
        return True

    async def _start_one(self) -> None:
        try:
            process = adopt_early_worker(self._finished) or await WorkerProcess.spawn(
                job_end_marker(), self._finished
            )
        except Exception as exc:
            self._starting.discard(asyncio.current_task())
            log.error("could not start a python worker process: %s", exc)
            self._fail_queued(f"could not start a worker process: {exc}")
            return
        self._starting.discard(asyncio.current_task())
        self._processes.add(process)
        self._take_next(process)

    def _fail_queued(self, message: str) -> None:
        if self._processes or self._starting:
            return  # another worker will take them
        while self._queue:
            job = self._queue.popleft()
            if not job.future.done():
                job.future.set_exception(WorkerDied(message))
                if job.on_done is not None:
                    job.on_done()

    def _take_next(self, process: WorkerProcess) -> None:
        while self._queue:
            job = self._queue.popleft()
            if self._jobs.get(job.id) is job and not job.future.done():
                self._dispatch(process, job)
                return
        self._idle.append(process)

    def _dispatch(self, process: WorkerProcess, job: Job) -> None:
        self._running[job.id] = process
        job.started, job.started_at = True, self._now()
        if job.on_start is not None:
            job.on_start()
        payload = job.payload if self._fence is None else {**job.payload, "fence": self._fence}
        process.run(job.id, payload, job)

    def _finished(
        self, process: WorkerProcess, job: Job, answer: dict[str, Any] | None, code: int | None
    ) -> None:
        """A worker answered `job` (answer) or died running it (exit code)."""
        self._running.pop(job.id, None)
        if answer is None:
            process.release()
            self._processes.discard(process)
            with contextlib.suppress(ValueError):
                self._idle.remove(process)
            self._resolve(job, exception=_death(process.pid, code))
            if self._queue:
                self._spawn()
            return
        self._resolve(job, answer=answer)
        self._take_next(process)

    @staticmethod
    def _resolve(
        job: Job, answer: dict[str, Any] | None = None, exception: Exception | None = None
    ) -> None:
        if job.future.done():
            return  # cancelled meanwhile
        if exception is not None:
            job.future.set_exception(exception)
            # Marked as seen: the plugin reads it when it still watches the job, but an engine
            # that lost its leases has let the attempt go, and the death is already logged.
            job.future.exception()
        else:
            job.future.set_result(answer or {})
        if job.on_done is not None:
            try:
                job.on_done()
            except Exception:  # the pool goes on: its worker takes the next job
                log.exception("the done callback of job %s failed", job.id)

    async def close(self) -> None:
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for process in list(self._processes):
            await process.close()
        for job in self._jobs.values():
            if not job.future.done():
                job.future.cancel()
        self._starting.clear()
        self._processes.clear()
        self._idle.clear()
        self._queue.clear()
        self._jobs.clear()


def _death(pid: int, code: int | None) -> WorkerDied:
    if code == FENCED_EXIT:
        return WorkerFenced(
            f"worker process {pid} ended the task: its engine could not show its leases alive"
        )
    return WorkerDied(f"worker process {pid} exited with code {code} while running the task")
