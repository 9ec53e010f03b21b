"""The ray plugin's task mode (`RayJobConfig(mode="task")`): the function runs as a Ray task
owned by the task host actor (host.py), through the engine's connection (driver.py).

- Never twice: the attempt's key is its submission id (one per execution, node, attempt),
  kept in plugin state; the host refuses a second task of a key it holds, so an engine that
  died before writing its state submits again and finds the task it had submitted.
- Watching: after the submission an asyncio task of the engine awaits the host's `wait`
  (no polling) and refreshes the node when the Ray task is over.
- Phases: submitted -> QUEUED, running -> RUNNING, the function's answer -> SUCCESS or its
  error (retryable USER failure, permanent for bad outputs); Ray failed the task (its worker
  died, it was cancelled) -> retryable SYSTEM failure RayTaskFailed; the host does not know
  a submitted key (it or the cluster restarted) -> retryable SYSTEM failure RayTaskLost.
- Logs: what the function printed, captured on the worker, reaches the task's log when the
  task is over (not line by line as in job mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sluice.plugins.answers import answer_phase, job_payload, no_source
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.ray.config import RayJobConfig, RayPluginConfig
from sluice.plugins.ray.driver import RayDriver
from sluice.plugins.ray.logs import forward_new_lines

STATE_VERSION = 1
WAIT = 30.0
"""Seconds one `wait` call may block on the host before the node is refreshed anyway."""
log = logging.getLogger(__name__)


class TaskMode:
    def __init__(self, config: RayPluginConfig) -> None:
        self._config = config
        self.driver = RayDriver()
        self._watchers: dict[str, asyncio.Task[None]] = {}

    @property
    def _name(self) -> str:
        return self._config.task_host

    async def handle(
        self,
        ctx: TaskExecutionContext,
        config: RayJobConfig,
        gcs: str,
        state: dict[str, Any],
        new_state: dict[str, Any],
    ) -> PhaseInfo:
        """One step of the attempt; `new_state` is what to persist once submitted (the key,
        the address, the owner). RayClusterError when the cluster cannot be reached."""
        key = str(new_state["submission_id"])
        host = await self.driver.host(gcs, self._name)
        if not state.get("submitted"):
            return await self._submit(ctx, config, host, gcs, key, state, new_state)
        outcome = await self.driver.call(self._name, host.poll.remote(key))
        where = f"Ray task {key} on {gcs}"
        if outcome["state"] == "RUNNING":
            self._watch(ctx, host, key, config.poll_interval)
            if state.get("poll_failures"):
                ctx.state_writer.put(STATE_VERSION, {**state, "poll_failures": 0})
            return PhaseInfo.running(0, f"{where} is running")
        if outcome["state"] == "UNKNOWN":
            return PhaseInfo.system_retryable_failure(
                "RayTaskLost", f"{where} is no longer known to the task host {self._name!r}"
            )
        if outcome["state"] == "LOST":
            return PhaseInfo.system_retryable_failure(
                "RayTaskFailed", f"{where}: {outcome.get('error', '')}"
            )
        forward_new_lines(ctx.log_writer, str(outcome.get("log", "")), 0, True)
        return answer_phase(ctx, outcome["answer"])

    async def _submit(
        self,
        ctx: TaskExecutionContext,
        config: RayJobConfig,
        host: Any,
        gcs: str,
        key: str,
        state: dict[str, Any],
        new_state: dict[str, Any],
    ) -> PhaseInfo:
        payload = job_payload(ctx, config.flyte, self._config.flyte_data_dir)
        if payload is None:
            return no_source(ctx)
        options = _task_options(config)
        fresh = await self.driver.call(self._name, host.submit.remote(key, payload, options))
        ctx.state_writer.put(STATE_VERSION, new_state)
        self._watch(ctx, host, key, config.poll_interval)
        how = "submitted to" if fresh else "found (submitted before) on"
        again = " (again: the engine that ran it is gone)" if state.get("resubmitted") else ""
        return PhaseInfo.queued(0, f"Ray task {key} {how} {gcs}{again}")

    def _watch(self, ctx: TaskExecutionContext, host: Any, key: str, pause: float) -> None:
        """Refresh the node once the host says the task is over (or after WAIT seconds)."""
        if key in self._watchers:
            return

        async def watch() -> None:
            try:
                await self.driver.call(self._name, host.wait.remote(key, WAIT))
            except Exception as exc:  # the next handle reports it, after a pause
                log.debug("waiting for Ray task %s: %s", key, exc)
                await asyncio.sleep(pause)
            finally:
                self._watchers.pop(key, None)
            ctx.refresh()

        self._watchers[key] = asyncio.create_task(watch())

    def stop_watching(self, key: str) -> None:
        watcher = self._watchers.pop(key, None)
        if watcher is not None:
            watcher.cancel()

    async def abort(self, gcs: str, key: str) -> None:
        """Cancel the Ray task (its worker is killed) and forget its key."""
        self.stop_watching(key)
        host = await self.driver.host(gcs, self._name)
        await self.driver.call(self._name, host.abort.remote(key))

    async def release(self, gcs: str, key: str) -> None:
        """The attempt is over: the host cancels the task if it still runs, else drops its
        answer after the grace."""
        self.stop_watching(key)
        host = await self.driver.host(gcs, self._name)
        grace = self._config.task_result_grace
        await self.driver.call(self._name, host.release.remote(key, grace))

    async def close(self) -> None:
        watchers, self._watchers = list(self._watchers.values()), {}
        for watcher in watchers:
            watcher.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*watchers, return_exceptions=True)
        await self.driver.close()


def _task_options(config: RayJobConfig) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": config.num_cpus}
    if config.runtime_env:
        options["runtime_env"] = dict(config.runtime_env)
    return options
