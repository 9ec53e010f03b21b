"""Calls to the remote service, each through its rate limiter and counted; and the quota token
a task holds while its remote job exists."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from sluice.clock import Clock
from sluice.errors import PluginError, UnknownNamespaceError
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.webapi.config import PluginConfig
from sluice.plugins.webapi.interfaces import AsyncPlugin, PermanentError, RetryLater, SyncPlugin
from sluice.plugins.webapi.metrics import WebApiMetrics
from sluice.plugins.webapi.ratelimit import Limiter, RateLimiter, SharedRateLimiter
from sluice.plugins.webapi.state import State, WebApiPhase
from sluice.resources.models import AllocationStatus
from sluice.resources.ratelimit.models import RateLimitRegistrar

T = TypeVar("T")

DEFAULT_WAIT_REASON = "Quota for task has exceeded. Waiting for the resource."


class RemoteCalls:
    """Every call to the service goes through here: reads under the read limiter, writes
    (create, delete, do) under the write limiter, which upstream never applied. With `shared`
    (an engine's rate limits) both buckets live in the store every engine shares."""

    def __init__(
        self,
        config: PluginConfig,
        metrics: WebApiMetrics,
        clock: Clock,
        shared: RateLimitRegistrar | None = None,
    ) -> None:
        read, write = config.read_rate_limiter, config.write_rate_limiter
        self.read_limiter: Limiter
        self.write_limiter: Limiter
        if shared is None:
            self.read_limiter = RateLimiter(read.qps, read.burst, clock)
            self.write_limiter = RateLimiter(write.qps, write.burst, clock)
        else:
            self.read_limiter = SharedRateLimiter(shared, "read", read.qps, read.burst, clock)
            self.write_limiter = SharedRateLimiter(shared, "write", write.qps, write.burst, clock)
        self._metrics = metrics
        self._clock = clock

    async def read(self, call: Callable[[], Awaitable[T]]) -> T:
        return await self._call("get", self.read_limiter, call)

    async def write(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        return await self._call(operation, self.write_limiter, call)

    async def _call(self, operation: str, limiter: Limiter, call: Callable[[], Awaitable[T]]) -> T:
        await limiter.acquire()
        self._metrics.calls.labels(operation).inc()
        try:
            return await call()
        except RetryLater as exc:
            # The service speaks for all our calls of this kind, not just this one.
            self._metrics.throttled.labels(operation).inc()
            limiter.pause_until(self._clock.now() + exc.delay)
            raise
        except Exception:
            self._metrics.call_failures.labels(operation).inc()
            raise


class TokenAllocator:
    """Claims and releases the task's quota token (token = the task's generated name)."""

    def __init__(self, quotas: Mapping[str, int], metrics: WebApiMetrics, clock: Clock) -> None:
        self._enabled = bool(quotas)
        self._metrics = metrics
        self._clock = clock

    async def allocate(
        self, plugin: AsyncPlugin | SyncPlugin, ctx: TaskExecutionContext, state: State
    ) -> PhaseInfo | None:
        """None once the task holds its token (or needs none); else the phase to report."""
        if not self._enabled:
            state.phase = WebApiPhase.ALLOCATION_TOKEN_ACQUIRED
            return None
        try:
            namespace, constraints = await plugin.resource_requirements(ctx)
        except PermanentError as exc:
            return state.finish(
                WebApiPhase.USER_FAILURE, PhaseInfo.permanent_failure(exc.code, exc.message)
            )
        if state.allocation_requested_at is None:
            state.allocation_requested_at = self._clock.now()
        state.namespace = namespace
        token = ctx.metadata.generated_name()
        try:
            status = await ctx.resource_manager.allocate_resource(namespace, token, constraints)
        except UnknownNamespaceError as exc:
            return state.finish(
                WebApiPhase.USER_FAILURE,
                PhaseInfo.permanent_failure("UnknownQuotaNamespace", str(exc)),
            )
        return await self._outcome(ctx, state, namespace, token, status)

    async def _outcome(
        self,
        ctx: TaskExecutionContext,
        state: State,
        namespace: str,
        token: str,
        status: AllocationStatus,
    ) -> PhaseInfo | None:
        if status is AllocationStatus.GRANTED:
            self._metrics.allocation_grant_success.inc()
            requested_at = state.allocation_requested_at or self._clock.now()
            self._metrics.resource_wait_time.observe(max(0.0, self._clock.now() - requested_at))
            state.phase = WebApiPhase.ALLOCATION_TOKEN_ACQUIRED
            return None
        if status in (AllocationStatus.EXHAUSTED, AllocationStatus.NAMESPACE_QUOTA_EXCEEDED):
            # Both are "wait": upstream errored on NAMESPACE_QUOTA_EXCEEDED.
            self._metrics.allocation_grant_failed.labels(status.name.lower()).inc()
            reason = await ctx.resource_manager.explain(namespace, token)
            return state.wait(reason or DEFAULT_WAIT_REASON)
        raise PluginError(f"resource manager answered {status!r} for {namespace!r}/{token!r}")

    async def release(self, ctx: TaskExecutionContext, state: State) -> None:
        """Give the token back (a no-op if it was never granted); idempotent."""
        if not self._enabled or state.namespace is None:
            return
        try:
            await ctx.resource_manager.release_resource(
                state.namespace, ctx.metadata.generated_name()
            )
        except Exception:
            self._metrics.resource_release_failed.inc()
            raise
        self._metrics.resource_release_success.inc()


class DelayedRefresh:
    """Asks the engine to evaluate a task again at a given time (a throttled call's retry)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: set[asyncio.Task[None]] = set()

    def schedule(self, refresh: Callable[[], None], at: float) -> None:
        task = asyncio.get_running_loop().create_task(self._later(refresh, at))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _later(self, refresh: Callable[[], None], at: float) -> None:
        # The deadline is absolute: this task may start after the clock has already moved.
        await self._clock.sleep(max(0.0, at - self._clock.now()))
        refresh()

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)
