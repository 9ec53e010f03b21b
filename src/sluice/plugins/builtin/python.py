"""The `python` plugin: runs python function tasks in the engine's local process pool.

An exception raised by the task is a user error carrying the last lines the task wrote on
stderr, then the traceback text (retried if the task has retries left); a worker process that
dies is a retryable system error, with the same stderr tail. A task whose engine was restarted
(its job is not in this engine's pool) is submitted again. What the task prints goes to the
attempt's log (ctx.log_writer). A job that started and finished between two calls reports the
RUNNING phase it passed through, at the time the worker took it, before its outcome.
A body its worker's watchdog ended, or refused to start, because the engine could not show
its leases alive (sluice/fencing.py) fails with the code "Fenced": the engine starts the
attempt again without spending a retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sluice.errors import PluginError
from sluice.fencing import FENCED_ERROR, LeaseFence
from sluice.plugins.builtin.pool import Job, WorkerDied, WorkerFenced, WorkerPool
from sluice.plugins.core.context import SetupContext, TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, TaskInfo, Transition
from sluice.plugins.core.plugin import PluginEntry, PluginProperties

PLUGIN_ID = "python"
_STATE_VERSION = 1
_PROPERTIES = PluginProperties(inline_calls=True)
"""Its calls only hand jobs to the pool or look at them: they never wait."""
_RUNNING_AFTER = 0.05
"""Seconds a job runs before the engine is woken to report it RUNNING (see _JobWatch)."""


class PythonPlugin:
    def __init__(
        self,
        workers: int,
        instance: str,
        now: Callable[[], float] | None = None,
        fence: LeaseFence | None = None,
    ) -> None:
        self._pool: WorkerPool | None = None
        self._workers = workers
        self._instance = instance
        self._now = now
        self._fence = fence

    @property
    def id(self) -> str:
        return PLUGIN_ID

    @property
    def properties(self) -> PluginProperties:
        return _PROPERTIES

    @property
    def wakes_on_change(self) -> bool:
        """A submitted job wakes its node itself (ctx.refresh) when it starts running, ends or
        its worker dies, from the pool's callbacks in this process: the engine's resync need not
        step it again for news (engine/engine.py)."""
        return True

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            fence_file = None if self._fence is None else self._fence.shared_file()
            self._pool = (
                WorkerPool(self._workers, fence_file=fence_file)
                if self._now is None
                else WorkerPool(self._workers, now=self._now, fence_file=fence_file)
            )
        return self._pool

    @staticmethod
    def _job_id(ctx: TaskExecutionContext) -> str:
        meta = ctx.metadata
        return f"{meta.execution_id}/{meta.node_id}/{meta.attempt}"

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        job = self.pool_job(ctx)
        if job is None:
            return self._submit(ctx)
        if not job.future.done():
            return Transition.to(
                _running(job) if job.started else PhaseInfo.queued(0, "waiting for a free worker")
            )
        outcome = self._outcome(ctx, job)
        return Transition.to(outcome.passing(_running(job)) if job.started else outcome)

    def pool_job(self, ctx: TaskExecutionContext) -> Job | None:
        return self.pool_job_by_id(self._job_id(ctx))

    def pool_job_by_id(self, job_id: str) -> Job | None:
        return None if self._pool is None else self._pool.get(job_id)

    def payload(self, ctx: TaskExecutionContext) -> dict[str, Any] | PhaseInfo:
        """The worker's job for this task, or the failure that stops it from being one."""
        source = ctx.task.source
        if source is None:
            return PhaseInfo.permanent_failure(
                "BadTaskSpecification", f"task {ctx.task.name!r} has no python source"
            )
        return {
            "module": source.module,
            "file": source.file,
            "qualname": source.qualname,
            "inputs": dict(ctx.inputs),
            "fencing_token": ctx.metadata.fencing_token,
        }

    def _submit(self, ctx: TaskExecutionContext) -> Transition:
        payload = self.payload(ctx)
        if isinstance(payload, PhaseInfo):
            return Transition.to(payload)
        previous = ctx.state_reader.get()
        watch = _JobWatch(self, self._job_id(ctx), ctx.refresh)
        self.pool.submit(
            self._job_id(ctx),
            payload,
            on_start=watch.started,
            on_output=_writer(ctx),
            on_done=watch.done,
        )
        ctx.state_writer.put(_STATE_VERSION, {"instance": self._instance})
        reason = "waiting for a free worker"
        if previous and previous.get("instance") != self._instance:
            reason = "submitted again: the engine that ran it is gone"
        return Transition.to(PhaseInfo.queued(0, reason))

    def _outcome(self, ctx: TaskExecutionContext, job: Job) -> PhaseInfo:
        future = job.future
        if future.cancelled():
            return PhaseInfo.aborted(0, "cancelled")
        error = future.exception()
        if isinstance(error, WorkerFenced):
            return fenced(str(error))
        if isinstance(error, WorkerDied):
            return PhaseInfo.system_retryable_failure(
                "WorkerDied", with_stderr_tail(job, str(error))
            )
        if error is not None:
            return PhaseInfo.system_retryable_failure("WorkerError", repr(error))
        answer: dict[str, Any] = future.result()
        if answer.get("fenced"):
            return fenced("the worker did not start the task: its engine could not show its leases")
        if "outputs" in answer:
            ctx.outputs.put(answer["outputs"])
            return PhaseInfo.success()
        return self.failure(answer["error"], job)

    def failure(self, failure: dict[str, Any], job: Job) -> PhaseInfo:
        """The phase of a task that raised (`failure` is the worker's answer)."""
        if failure["type"] == "OutputsError":
            return PhaseInfo.permanent_failure("OutputsError", failure["message"])
        message = failure["traceback"] or f"{failure['type']}: {failure['message']}"
        message = with_stderr_tail(job, message.rstrip())
        return PhaseInfo.retryable_failure(failure["type"], message, ErrorKind.USER)

    async def warm_up(self) -> None:
        """Start a worker process before the first task needs one (more start as jobs
        queue up)."""
        self.pool.start(1)

    def abandon(self, execution_id: str) -> None:
        """Stop this process's bodies of an execution another engine drives now."""
        if self._pool is not None:
            self._pool.cancel_where(f"{execution_id}/")

    async def abort(self, ctx: TaskExecutionContext) -> None:
        if self._pool is not None:
            self._pool.cancel(self._job_id(ctx))

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        if self._pool is not None:
            self._pool.cancel(self._job_id(ctx))

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class _JobWatch:
    """When the engine looks at a job again. At its end: at once (in the pool's callback that
    read the answer, not a loop turn later). At its start: only if it still runs a moment
    later, to report it RUNNING; a job done sooner reports the RUNNING it passed through, at
    its start time, with its outcome (one engine step per short task instead of two), and its
    timer is cancelled, so that it wakes nobody."""

    def __init__(self, plugin: PythonPlugin, job_id: str, refresh: Callable[[], None]) -> None:
        self._plugin, self._job_id, self._refresh = plugin, job_id, refresh
        self._timer: asyncio.TimerHandle | None = None

    def started(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(_RUNNING_AFTER, self._still_running)

    def _still_running(self) -> None:
        self._timer = None
        job = self._plugin.pool_job_by_id(self._job_id)
        if job is not None and not job.future.done():
            self._refresh()

    def done(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._refresh()


def fenced(message: str) -> PhaseInfo:
    """The body was ended, or never started, by fencing: not the task's failure."""
    return PhaseInfo.system_retryable_failure(FENCED_ERROR, message)


def _running(job: Job) -> PhaseInfo:
    started = job.started_at
    info = TaskInfo(occurred_at=started) if started is not None else None
    return PhaseInfo.running(1, "running in a local worker", info)


def _writer(ctx: TaskExecutionContext) -> Callable[[str, str], None]:
    log = ctx.log_writer
    return lambda text, stream: log.write(text, "stderr" if stream == "stderr" else "stdout")


def with_stderr_tail(job: Job, message: str) -> str:
    """The error message after the last lines the task wrote on stderr (the whole log is in
    `sluice logs`): the message stays last, as its last line is the error's one-line summary."""
    if not job.stderr_tail:
        return message
    tail = "\n".join(job.stderr_tail)
    return f"last lines of stderr:\n{tail}\n\n{message}"


def _load(ctx: SetupContext) -> PythonPlugin:
    workers = ctx.config.get("workers", 2)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PluginError(f"plugin 'python': workers must be an int >= 1, got {workers!r}")
    return PythonPlugin(workers, str(ctx.config.get("instance", "")), ctx.clock.now, ctx.fence)


# Not a catch-all (is_default=False): a task of an unknown type must fail naming the
# registered plugins, not run its stub body as Python.
ENTRY = PluginEntry(id=PLUGIN_ID, task_types=("python",), load=_load)
