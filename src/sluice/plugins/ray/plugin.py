"""The `ray` plugin: a python function task runs as a Ray job (see the package docstring)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import shlex
import uuid
from typing import Any

from sluice.plugins.answers import answer_phase, job_payload, no_source
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginProperties
from sluice.plugins.ray.cluster import ClusterStartError, LocalRayCluster
from sluice.plugins.ray.config import RayJobConfig, RayPluginConfig, parse_job_config
from sluice.plugins.ray.jobs import INSTALL_HINT, JobView, RayClusterError, RayJobs
from sluice.plugins.ray.logs import forward_new_lines, log_tail
from sluice.plugins.ray.protocol import JOB_ENV, find_answer
from sluice.plugins.ray.tasks import TaskMode
from sluice.spec.models import TaskSpec

PLUGIN_ID = "ray"
STATE_VERSION = 1
MAX_FRESH_STARTS = 20
MAX_BACK_OFF = 10.0
log = logging.getLogger(__name__)


def submission_id(ctx: TaskExecutionContext) -> str:
    """The job's id on the cluster: one per (execution, node, attempt), so a restarted engine
    finds the job it submitted, and the cluster refuses a second one of that id."""
    return "sluice-" + ctx.metadata.generated_name(max_length=100)


class RayPlugin:
    def __init__(self, config: RayPluginConfig) -> None:
        self._config = config
        self._instance = uuid.uuid4().hex  # tells this engine's local clusters from a dead one's
        self._jobs: dict[str, RayJobs] = {}
        self._clusters: dict[Any, LocalRayCluster] = {}
        self._starting: dict[Any, asyncio.Task[None]] = {}
        self._start_errors: dict[Any, str] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks = TaskMode(config)

    @property
    def id(self) -> str:
        return PLUGIN_ID

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    @property
    def unavailable(self) -> str | None:
        return None if importlib.util.find_spec("ray") else INSTALL_HINT

    def validate_task(self, task: TaskSpec) -> None:
        parse_job_config(task.custom, task.name)

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        config = parse_job_config(ctx.task.custom, ctx.task.name)
        state = self._state(ctx)
        if config.mode == "task":
            return Transition.to(await self._handle_task(ctx, config, state))
        address, python, waiting = self._target(ctx, config, state)
        if waiting is not None:
            return Transition.to(waiting)
        jobs = self._jobs.setdefault(address, RayJobs(address))
        try:
            sid, job = await self._current_job(ctx, jobs, state)
            if job is None:
                return Transition.to(await self._submit(ctx, config, jobs, python, state, sid))
            return Transition.to(await self._observe(ctx, config, jobs, sid, job, state))
        except RayClusterError as exc:
            return Transition.to(self._poll_failed(ctx, config, state, exc))

    async def _handle_task(
        self, ctx: TaskExecutionContext, config: RayJobConfig, state: dict[str, Any]
    ) -> PhaseInfo:
        """A `mode="task"` step: the function as a Ray task owned by the task host (tasks.py)."""
        gcs, waiting = self._task_target(ctx, config, state)
        if waiting is not None:
            return waiting
        sid = _named_id(ctx, state)
        new_state = {"mode": "task", "gcs": gcs, "submission_id": sid, "submitted": True}
        owned = not (config.gcs_address or self._config.gcs_address)
        new_state |= {"owner": self._instance} if owned else {}
        try:
            return await self._tasks.handle(ctx, config, gcs, state, new_state)
        except RayClusterError as exc:
            return self._poll_failed(ctx, config, state, exc)

    def _task_target(
        self, ctx: TaskExecutionContext, config: RayJobConfig, state: dict[str, Any]
    ) -> tuple[str, PhaseInfo | None]:
        """(GCS address, None), or a phase while a local cluster starts or when the task
        names a dashboard but no GCS."""
        gcs = self._task_gcs(config, state)
        if gcs:
            return gcs, None
        if config.address or self._config.address:
            return "", PhaseInfo.permanent_failure(
                "BadTaskSpecification",
                f"task {ctx.task.name!r}: mode='task' on the cluster at "
                f"{config.address or self._config.address} needs its gcs_address (host:port)",
            )
        cluster = self._clusters.get(config.local_shape())
        if cluster is not None:
            return cluster.gcs_address, None
        return "", self._start_cluster(ctx, config, config.local_shape())

    def _task_gcs(self, config: RayJobConfig, state: dict[str, Any]) -> str | None:
        return state.get("gcs") or config.gcs_address or self._config.gcs_address

    @staticmethod
    async def _current_job(
        ctx: TaskExecutionContext, jobs: RayJobs, state: dict[str, Any]
    ) -> tuple[str, JobView | None]:
        """The attempt's submission id and job (None: not submitted). The id its state names,
        else the first of its ids whose job the cluster does not know or has not stopped: an
        attempt the engine starts afresh (its state forgotten, its job stopped) goes on under
        the next id, and one whose engine died before its state was written finds its job."""
        named = state.get("submission_id")
        if named:
            return named, await jobs.find(named)
        base = submission_id(ctx)
        for restart in range(MAX_FRESH_STARTS):
            sid = f"{base}-r{restart}" if restart else base
            job = await jobs.find(sid)
            if job is None or job.status != "STOPPED":
                break
        return sid, job

    def _state(self, ctx: TaskExecutionContext) -> dict[str, Any]:
        state = ctx.state_reader.get() or {}
        if state.get("owner") not in (None, self._instance):
            # Its cluster was a local one of an engine that is gone, and died with it.
            return {"resubmitted": True}
        return state

    def _target(
        self, ctx: TaskExecutionContext, config: RayJobConfig, state: dict[str, Any]
    ) -> tuple[str, str, PhaseInfo | None]:
        """(dashboard address, interpreter, None), or a phase to report while a local
        cluster starts or after it failed to."""
        address = state.get("address") or config.address or self._config.address
        if address:
            return address, config.python or "python", None
        key = submission_id(ctx) if config.shutdown_after_job else config.local_shape()
        cluster = self._clusters.get(key)
        if cluster is not None:
            return cluster.address, cluster.python, None
        return "", "", self._start_cluster(ctx, config, key)

    def _start_cluster(
        self, ctx: TaskExecutionContext, config: RayJobConfig, key: Any
    ) -> PhaseInfo:
        error = self._start_errors.pop(key, None)
        if error is not None:
            return PhaseInfo.system_retryable_failure("RayClusterStartFailed", error)
        starting = self._starting.get(key)
        if starting is None:
            workers = tuple(g.cpus for g in config.worker_groups for _ in range(g.replicas))
            cluster = LocalRayCluster(config.head_cpus, workers, config.python or "")
            cluster.launch()
            starting = asyncio.create_task(self._wait_started(key, cluster))
            self._starting[key] = starting
        starting.add_done_callback(lambda _: ctx.refresh())
        return PhaseInfo.initializing(0, "starting a local Ray cluster")

    async def _wait_started(self, key: Any, cluster: LocalRayCluster) -> None:
        try:
            await cluster.wait_ready(self._config.start_timeout)
        except (ClusterStartError, asyncio.CancelledError) as exc:
            self._start_errors[key] = str(exc) or "cancelled"
            await asyncio.to_thread(cluster.stop)
        else:
            self._clusters[key] = cluster
        finally:
            self._starting.pop(key, None)

    async def _submit(
        self,
        ctx: TaskExecutionContext,
        config: RayJobConfig,
        jobs: RayJobs,
        python: str,
        state: dict[str, Any],
        sid: str,
    ) -> PhaseInfo:
        if state.get("submitted"):
            return PhaseInfo.system_retryable_failure(
                "RayJobLost", f"Ray job {sid} is no longer known to the cluster at {jobs.address}"
            )
        payload = job_payload(ctx, config.flyte, self._config.flyte_data_dir)
        if payload is None:
            return no_source(ctx)
        await jobs.submit(
            sid,
            f"{shlex.quote(python)} -m sluice.plugins.ray.runner",
            **_job_options(ctx, config, payload),
        )
        ctx.state_writer.put(STATE_VERSION, self._new_state(config, jobs.address, sid))
        self._poll_later(ctx, sid, config.poll_interval)
        again = " (again: the engine that ran it is gone)" if state.get("resubmitted") else ""
        return PhaseInfo.queued(0, f"Ray job {sid} submitted to {jobs.address}{again}")

    def _new_state(self, config: RayJobConfig, address: str, sid: str) -> dict[str, Any]:
        owned = not (config.address or self._config.address)
        state: dict[str, Any] = {"address": address, "submission_id": sid, "submitted": True}
        state["log_offset"] = 0
        return state | ({"owner": self._instance} if owned else {})

    async def _observe(
        self,
        ctx: TaskExecutionContext,
        config: RayJobConfig,
        jobs: RayJobs,
        sid: str,
        job: JobView,
        state: dict[str, Any],
    ) -> PhaseInfo:
        logs = "" if job.status == "PENDING" else await jobs.logs(sid)
        offset = state.get("log_offset", 0)
        offset = forward_new_lines(ctx.log_writer, logs, offset, job.is_terminal)
        if offset != state.get("log_offset") or state.get("poll_failures"):
            ctx.state_writer.put(STATE_VERSION, {**state, "log_offset": offset, "poll_failures": 0})
        if not job.is_terminal:
            self._poll_later(ctx, sid, config.poll_interval)
            reason = f"Ray job {sid} is {job.status} on {jobs.address}"
            if job.status == "RUNNING":
                return PhaseInfo.running(0, reason)
            return PhaseInfo.initializing(0, reason)
        return _finished(ctx, sid, job, logs)

    def _poll_failed(
        self,
        ctx: TaskExecutionContext,
        config: RayJobConfig,
        state: dict[str, Any],
        exc: RayClusterError,
    ) -> PhaseInfo:
        """Try again after a back-off (a cluster just started may not take jobs yet; a busy
        one may time out), up to `max_poll_failures` calls in a row."""
        failures = int(state.get("poll_failures", 0)) + 1
        if failures >= self._config.max_poll_failures:
            return PhaseInfo.system_retryable_failure("RayClusterUnreachable", str(exc))
        ctx.state_writer.put(STATE_VERSION, {**state, "poll_failures": failures})
        delay = min(MAX_BACK_OFF, config.poll_interval * 2**failures)
        self._poll_later(ctx, _named_id(ctx, state), delay)
        reason = f"{exc} ({failures}/{self._config.max_poll_failures} failed calls)"
        if state.get("submitted"):
            return PhaseInfo.running(failures, reason)
        return PhaseInfo.initializing(failures, reason)

    def _poll_later(self, ctx: TaskExecutionContext, sid: str, delay: float) -> None:
        previous = self._timers.pop(sid, None)
        if previous is not None:
            previous.cancel()
        self._timers[sid] = asyncio.get_running_loop().call_later(delay, ctx.refresh)

    async def abort(self, ctx: TaskExecutionContext) -> None:
        if await self._end_task(ctx, abort=True):
            return
        await self._stop_job(ctx)

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        timer = self._timers.pop(_named_id(ctx, self._state(ctx)), None)
        if timer is not None:
            timer.cancel()
        if await self._end_task(ctx, abort=False):
            return
        await self._stop_job(ctx)  # a job left running by a failed poll or a timeout
        cluster = self._clusters.pop(submission_id(ctx), None)  # one started for this job alone
        if cluster is not None:
            await asyncio.to_thread(cluster.stop)

    async def _end_task(self, ctx: TaskExecutionContext, abort: bool) -> bool:
        """Abort or release a task-mode attempt's Ray task; False for a job-mode task."""
        config = parse_job_config(ctx.task.custom, ctx.task.name)
        if config.mode != "task":
            return False
        state = self._state(ctx)
        gcs = self._task_gcs(config, state)
        if not gcs:
            return True  # its local cluster never started: nothing was submitted
        sid = _named_id(ctx, state)
        try:
            if abort:
                await self._tasks.abort(gcs, sid)
            else:
                await self._tasks.release(gcs, sid)
        except RayClusterError as exc:
            log.warning("could not %s Ray task %s: %s", "abort" if abort else "release", sid, exc)
        return True

    async def _stop_job(self, ctx: TaskExecutionContext) -> None:
        state = self._state(ctx)
        address = state.get("address")
        if not address:
            return
        sid = _named_id(ctx, state)
        try:
            await self._jobs.setdefault(address, RayJobs(address)).stop(sid)
        except RayClusterError as exc:
            log.warning("could not stop Ray job %s: %s", sid, exc)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for starting in list(self._starting.values()):
            starting.cancel()
        await asyncio.gather(*self._starting.values(), return_exceptions=True)
        await self._tasks.close()  # disconnects before any local cluster stops
        clusters, self._clusters = list(self._clusters.values()), {}
        await asyncio.gather(*(asyncio.to_thread(c.stop) for c in clusters))


def _named_id(ctx: TaskExecutionContext, state: dict[str, Any]) -> str:
    return str(state.get("submission_id") or submission_id(ctx))


def _job_options(
    ctx: TaskExecutionContext, config: RayJobConfig, payload: dict[str, Any]
) -> dict[str, Any]:
    runtime_env = dict(config.runtime_env)
    runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), JOB_ENV: json.dumps(payload)}
    meta = ctx.metadata
    metadata = {
        "sluice_execution": meta.execution_id,
        "sluice_node": meta.node_id,
        "sluice_attempt": str(meta.attempt),
        **config.metadata,
    }
    options: dict[str, Any] = {"runtime_env": runtime_env, "metadata": metadata}
    if config.entrypoint_num_cpus is not None:
        options["entrypoint_num_cpus"] = config.entrypoint_num_cpus
    return options


def _finished(ctx: TaskExecutionContext, sid: str, job: JobView, logs: str) -> PhaseInfo:
    if job.status == "STOPPED":
        return PhaseInfo.system_retryable_failure(
            "RayJobStopped", f"Ray job {sid} was stopped outside sluice: {job.message}"
        )
    answer = find_answer(logs)
    if answer is not None:
        return answer_phase(ctx, answer)
    what = "ended without a result" if job.status == "SUCCEEDED" else "failed"
    return PhaseInfo.system_retryable_failure(
        "RayJobFailed", f"Ray job {sid} {what}: {job.message}\n{log_tail(logs)}".rstrip()
    )
