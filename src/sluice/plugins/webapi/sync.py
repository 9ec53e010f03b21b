"""Turns a SyncPlugin into a core sluice Plugin (upstream declared SyncPlugin but never ran it).

NOT_STARTED --token granted--> ALLOCATION_TOKEN_ACQUIRED --do--> terminal. `do` runs under the
write limiter; a throttled `do` waits and is tried again, a failing one is a retryable system
failure. There is nothing remote to cancel on abort; finalize releases the token.
"""

from __future__ import annotations

from sluice.clock import Clock
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.core.plugin import validate_task
from sluice.plugins.webapi.base import AdapterBase
from sluice.plugins.webapi.config import PluginConfig
from sluice.plugins.webapi.interfaces import SyncPlugin
from sluice.plugins.webapi.metrics import WebApiMetrics
from sluice.plugins.webapi.state import State, WebApiPhase, settle
from sluice.resources.ratelimit.models import RateLimitRegistrar
from sluice.spec.models import TaskSpec


class SyncPluginAdapter(AdapterBase):
    def __init__(
        self,
        plugin_id: str,
        plugin: SyncPlugin,
        config: PluginConfig,
        metrics: WebApiMetrics,
        clock: Clock,
        rate_limits: RateLimitRegistrar | None = None,
    ) -> None:
        super().__init__(plugin_id, plugin, config, metrics, clock, rate_limits)
        self._plugin = plugin

    def validate_task(self, task: TaskSpec) -> None:
        validate_task(self._plugin, task)

    async def _step(self, ctx: TaskExecutionContext, state: State) -> PhaseInfo:
        if state.phase == WebApiPhase.NOT_STARTED:
            waiting = await self._allocator.allocate(self._plugin, ctx, state)
            if waiting is not None:
                return waiting
        throttled = self._waiting_to_retry(state)
        if throttled is not None:
            return throttled
        try:
            info = await self.calls.write("do", lambda: self._plugin.do(ctx))
        except Exception as exc:
            return self._write_failed(ctx, state, "do", exc)
        return settle(state, info)

    async def abort(self, ctx: TaskExecutionContext) -> None:
        """A synchronous call has nothing left running remotely."""
        return None
