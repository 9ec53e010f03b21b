"""What the async and sync adapters share: state persistence, the quota token, write calls and
how their failures become phases."""

from __future__ import annotations

from sluice.clock import Clock
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginProperties
from sluice.plugins.webapi.calls import DelayedRefresh, RemoteCalls, TokenAllocator
from sluice.plugins.webapi.config import PluginConfig
from sluice.plugins.webapi.interfaces import (
    AsyncPlugin,
    Closeable,
    PermanentError,
    RetryLater,
    SyncPlugin,
)
from sluice.plugins.webapi.metrics import WebApiMetrics
from sluice.plugins.webapi.state import (
    STATE_VERSION,
    State,
    WebApiPhase,
    load_state,
    outcome_from_json,
)
from sluice.resources.ratelimit.models import RateLimitRegistrar


class AdapterBase:
    def __init__(
        self,
        plugin_id: str,
        plugin: AsyncPlugin | SyncPlugin,
        config: PluginConfig,
        metrics: WebApiMetrics,
        clock: Clock,
        rate_limits: RateLimitRegistrar | None = None,
    ) -> None:
        self._id = plugin_id
        self._base_plugin = plugin
        self.config = config
        self.metrics = metrics
        self.calls = RemoteCalls(config, metrics, clock, rate_limits)
        self._allocator = TokenAllocator(config.resource_quotas, metrics, clock)
        self._timers = DelayedRefresh(clock)
        self._clock = clock

    @property
    def id(self) -> str:
        return self._id

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        state = load_state(ctx.state_reader)
        if isinstance(state, PhaseInfo):
            return Transition.to(state)
        if state.outcome is not None:  # terminal already: report it again, call nothing
            return Transition.to(outcome_from_json(state.outcome))
        info = await self._step(ctx, state)
        ctx.state_writer.put(STATE_VERSION, state.to_json())
        return Transition.to(info)

    async def _step(self, ctx: TaskExecutionContext, state: State) -> PhaseInfo:
        raise NotImplementedError

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        """Release the quota token; idempotent."""
        state = load_state(ctx.state_reader)
        if isinstance(state, State):
            await self._allocator.release(ctx, state)

    async def close(self) -> None:
        """Stop background work and close the plugin's connections (engine shutdown)."""
        await self._timers.close()
        if isinstance(self._base_plugin, Closeable):
            await self._base_plugin.close()

    def _waiting_to_retry(self, state: State) -> PhaseInfo | None:
        if state.retry_at is not None and self._clock.now() < state.retry_at:
            return PhaseInfo.waiting_for_resources(state.phase_version, state.reason)
        state.retry_at = None
        return None

    def _write_failed(
        self, ctx: TaskExecutionContext, state: State, operation: str, exc: Exception
    ) -> PhaseInfo:
        """The phase to report when `create` or `do` raised `exc`."""
        if isinstance(exc, RetryLater):
            # Throttled is not failed: wait (no retry spent) and ask to be evaluated again then.
            state.retry_at = self._clock.now() + exc.delay
            self._timers.schedule(ctx.refresh, state.retry_at)
            return state.wait(f"{exc.reason}; {operation} retried in {exc.delay:g}s")
        if isinstance(exc, PermanentError):
            return state.finish(
                WebApiPhase.USER_FAILURE, PhaseInfo.permanent_failure(exc.code, exc.message)
            )
        # The service (or the network) failed, not the task: a system error, retried by the
        # engine without spending the task's own retries.
        failure = PhaseInfo.retryable_failure(
            f"{operation.capitalize()}Failed",
            f"{operation} failed: {type(exc).__name__}: {exc}",
            ErrorKind.SYSTEM,
        )
        return state.finish(WebApiPhase.SYSTEM_FAILURE, failure)
