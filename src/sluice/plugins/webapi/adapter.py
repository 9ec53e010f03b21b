"""Turns an AsyncPlugin into a core sluice Plugin: Flyte's web-API state machine.

    NOT_STARTED --token granted--> ALLOCATION_TOKEN_ACQUIRED --create--> RESOURCES_CREATED
        --status--> SUCCEEDED | USER_FAILURE | SYSTEM_FAILURE

Each `handle` advances as far as it can and persists the state through the task's state
writer, so an engine restart (a fresh adapter, the same persisted state) resumes polling the
job it created instead of creating another. A refused token (EXHAUSTED or
NAMESPACE_QUOTA_EXCEEDED) is WAITING_FOR_RESOURCES with the resource manager's explanation. A
failed create is a retryable failure; the token is held until `finalize`. Polls happen in the
background cache; `handle` only reads the cached resource and asks the plugin for the phase.
"""

from __future__ import annotations

import json

from sluice.clock import Clock
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.core.plugin import validate_task
from sluice.plugins.webapi.base import AdapterBase
from sluice.plugins.webapi.cache import CacheItem, ResourceCache
from sluice.plugins.webapi.config import PluginConfig
from sluice.plugins.webapi.interfaces import (
    AsyncPlugin,
    DeleteContext,
    PermanentError,
    Resource,
    ResourceMeta,
    RetryLater,
    StatusContext,
)
from sluice.plugins.webapi.metrics import WebApiMetrics
from sluice.plugins.webapi.state import State, WebApiPhase, load_state, settle, web_api_phase_of
from sluice.resources.ratelimit.models import RateLimitRegistrar
from sluice.spec.models import TaskSpec

MAX_DELETE_ATTEMPTS = 5
"""Throttled deletes (HTTP 429) tried this many times, each after the service's delay."""


class AsyncPluginAdapter(AdapterBase):
    def __init__(
        self,
        plugin_id: str,
        plugin: AsyncPlugin,
        config: PluginConfig,
        metrics: WebApiMetrics,
        clock: Clock,
        rate_limits: RateLimitRegistrar | None = None,
    ) -> None:
        super().__init__(plugin_id, plugin, config, metrics, clock, rate_limits)
        self._plugin = plugin
        self.cache = ResourceCache(plugin, self.calls, config.caching, clock)

    def validate_task(self, task: TaskSpec) -> None:
        validate_task(self._plugin, task)

    async def _step(self, ctx: TaskExecutionContext, state: State) -> PhaseInfo:
        if state.phase == WebApiPhase.NOT_STARTED:
            waiting = await self._allocator.allocate(self._plugin, ctx, state)
            if waiting is not None:
                return waiting
        if state.phase == WebApiPhase.ALLOCATION_TOKEN_ACQUIRED:
            return await self._launch(ctx, state)
        return await self._monitor(ctx, state)

    async def _launch(self, ctx: TaskExecutionContext, state: State) -> PhaseInfo:
        throttled = self._waiting_to_retry(state)
        if throttled is not None:
            return throttled
        try:
            meta, resource = await self.calls.write("create", lambda: self._plugin.create(ctx))
        except Exception as exc:
            return self._write_failed(ctx, state, "create", exc)
        if not _is_json(meta):  # a plugin bug; creating again would only orphan another job
            return state.finish(
                WebApiPhase.SYSTEM_FAILURE,
                PhaseInfo.system_permanent_failure(
                    "BadResourceMeta", f"create returned a resource meta that is not JSON: {meta!r}"
                ),
            )
        state.resource_meta, state.phase = meta, WebApiPhase.RESOURCES_CREATED
        item = self._item(ctx, state)
        if resource is None:
            return PhaseInfo.queued(0, "job created")
        item.resource, item.synced = resource, True
        return await self._status(ctx, state, meta, resource)

    async def _monitor(self, ctx: TaskExecutionContext, state: State) -> PhaseInfo:
        meta = state.resource_meta
        if meta is None:
            return state.finish(
                WebApiPhase.SYSTEM_FAILURE,
                PhaseInfo.system_retryable_failure(
                    "CorruptedPluginState", "resources created but no resource meta persisted"
                ),
            )
        item = self._item(ctx, state)
        state.sync_failure_count, state.error_message = item.sync_failure_count, item.error_message
        if item.failure is not None:
            self.cache.drop(item.key)
            return state.finish(WebApiPhase.SYSTEM_FAILURE, item.failure)
        if not item.synced:
            return PhaseInfo.queued(0, "job created")
        return await self._status(ctx, state, meta, item.resource)

    async def _status(
        self, ctx: TaskExecutionContext, state: State, meta: ResourceMeta, resource: Resource
    ) -> PhaseInfo:
        try:
            info = await self._plugin.status(StatusContext(ctx, meta, resource))
        except PermanentError as exc:
            info = PhaseInfo.permanent_failure(exc.code, exc.message)
        if web_api_phase_of(info).is_terminal():
            self.cache.drop(ctx.metadata.generated_name())
        return settle(state, info)

    def _item(self, ctx: TaskExecutionContext, state: State) -> CacheItem:
        seed = CacheItem(
            ctx.metadata.generated_name(),
            state.resource_meta or {},
            ctx.secrets,
            ctx.refresh,
            sync_failure_count=state.sync_failure_count,
            error_message=state.error_message,
        )
        return self.cache.get_or_create(seed)

    async def abort(self, ctx: TaskExecutionContext) -> None:
        """Cancel the remote job (if one was created) and stop polling it; idempotent."""
        self.cache.drop(ctx.metadata.generated_name())
        state = load_state(ctx.state_reader)
        if not isinstance(state, State) or state.resource_meta is None:
            return
        delete = DeleteContext(state.resource_meta, "Aborted", ctx.secrets)
        for attempt in range(1, MAX_DELETE_ATTEMPTS + 1):
            try:
                await self.calls.write("delete", lambda: self._plugin.delete(delete))
                return
            except RetryLater:
                # The write limiter is now paused until the service's retry time.
                if attempt == MAX_DELETE_ATTEMPTS:
                    raise

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        """Stop polling the job and release the quota token; idempotent."""
        self.cache.drop(ctx.metadata.generated_name())
        await super().finalize(ctx)

    async def close(self) -> None:
        await self.cache.close()
        await super().close()


def _is_json(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, dict)
