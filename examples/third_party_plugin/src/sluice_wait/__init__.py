"""A core sluice plugin for task type "wait": the task succeeds `seconds` after it starts.

It shows the parts every plugin uses: plugin state (when the wait began, so an engine
restart does not restart the wait), `refresh()` (wake the engine when the time is up instead
of being polled), idempotent `handle`/`abort`/`finalize`, and config from the SetupContext.
"""

from __future__ import annotations

import asyncio

from sluice.plugins.core import (
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    SetupContext,
    TaskExecutionContext,
    Transition,
)


class WaitPlugin:
    id = "wait"
    properties = PluginProperties()

    def __init__(self, max_seconds: float) -> None:
        self._max_seconds = max_seconds
        self._timers: dict[str, asyncio.TimerHandle] = {}

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        seconds = float(ctx.task.custom.get("seconds", 1.0))
        if seconds > self._max_seconds:
            return Transition.to(
                PhaseInfo.permanent_failure(
                    "TooLong", f"wait of {seconds}s is over the {self._max_seconds}s allowed"
                )
            )
        state = ctx.state_reader.get()
        if state is None:
            state = {"started_at": ctx.clock.now()}
            ctx.state_writer.put(1, state)
        left = state["started_at"] + seconds - ctx.clock.now()
        if left <= 0:
            ctx.outputs.put({"o0": seconds} if "o0" in ctx.task.interface.outputs else {})
            return Transition.to(PhaseInfo.success())
        self._wake_later(ctx, left)
        return Transition.to(PhaseInfo.running(0, f"waiting {seconds}s"))

    def _wake_later(self, ctx: TaskExecutionContext, delay: float) -> None:
        key = ctx.metadata.generated_name()
        if key not in self._timers:
            self._timers[key] = asyncio.get_running_loop().call_later(delay, ctx.refresh)

    async def abort(self, ctx: TaskExecutionContext) -> None:
        await self.finalize(ctx)

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        timer = self._timers.pop(ctx.metadata.generated_name(), None)
        if timer is not None:
            timer.cancel()


def _load(setup: SetupContext) -> WaitPlugin:
    return WaitPlugin(float(setup.config.get("max_seconds", 3600)))


ENTRY = PluginEntry(id="wait", task_types=("wait",), load=_load)
