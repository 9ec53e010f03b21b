"""PluginManager: the core Plugin that drives a K8sPlugin's objects through a task's life.

State machine (persisted through the plugin state writer, version 1):
NotStarted -> (create succeeded or the object already exists) -> Started -> terminal.
A refused create (quota) stays NotStarted and tries again on the next evaluation.
"""

from __future__ import annotations

import random
from dataclasses import replace

from sluice.clock import Clock, SystemClock
from sluice.errors import PluginError
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, TaskInfo, Transition
from sluice.plugins.core.plugin import PluginProperties, validate_task
from sluice.plugins.k8s.cache import RefreshRegistry, WatchCache
from sluice.plugins.k8s.cleanup import ObjectCleaner, addressed
from sluice.plugins.k8s.client import KubeClient
from sluice.plugins.k8s.config import KubePluginConfig
from sluice.plugins.k8s.errors import (
    KubeAlreadyExistsError,
    KubeApiError,
    KubeEntityTooLargeError,
    KubeForbiddenError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeQuotaExceededError,
)
from sluice.plugins.k8s.metadata import MANAGED_SELECTOR, ObjectMetadataPolicy
from sluice.plugins.k8s.objects import Manifest, ObjectRef, is_being_deleted
from sluice.plugins.k8s.plugin import AbortBehavior, AbortOverride, K8sPlugin
from sluice.plugins.k8s.state import STATE_VERSION, ManagerState
from sluice.spec.models import TaskSpec

SUBMITTED_REASON = "task submitted to Kubernetes"
MAX_NAME_LENGTH = 63
MIN_NAME_LENGTH = 8


def create_failure(error: KubeApiError) -> PhaseInfo:
    """The phase for a refused create (AlreadyExists is not a failure: it is handled first)."""
    if isinstance(error, KubeQuotaExceededError):
        if error.requests_exceed_limits:  # can never be admitted: fail now (upstream #2933)
            return PhaseInfo.permanent_failure("ResourceRequestsExceedLimits", error.message)
        return PhaseInfo.waiting_for_resources(reason=f"Exceeded resourcequota: {error.message}")
    if isinstance(error, KubeForbiddenError):
        return PhaseInfo.retryable_failure("RuntimeFailure", error.message)
    if isinstance(error, KubeEntityTooLargeError):
        return PhaseInfo.permanent_failure("EntityTooLarge", error.message)
    if isinstance(error, KubeInvalidError):
        return PhaseInfo.permanent_failure("BadTaskFormat", error.message)
    return PhaseInfo.system_retryable_failure("KubeApiError", f"create failed: {error.message}")


def _system_failure(code: str, message: str) -> PhaseInfo:
    # cleanup: the object may still exist, so finalize deletes it even when objects are kept
    return PhaseInfo.retryable_failure(code, message, ErrorKind.SYSTEM, cleanup=True)


class PluginManager:
    """Wraps a K8sPlugin as a core Plugin. `close()` stops the watch (call it at shutdown)."""

    def __init__(
        self,
        plugin_id: str,
        plugin: K8sPlugin,
        client: KubeClient,
        config: KubePluginConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        owns_client: bool = False,
        unavailable: str | None = None,
    ) -> None:
        limit = plugin.properties.generated_name_max_length
        if not MIN_NAME_LENGTH <= limit <= MAX_NAME_LENGTH:
            raise PluginError(
                f"plugin {plugin_id!r}: generated_name_max_length must be "
                f"between {MIN_NAME_LENGTH} and {MAX_NAME_LENGTH}, got {limit}"
            )
        self._id, self._plugin, self._client = plugin_id, plugin, client
        self._config = config or KubePluginConfig()
        self._clock = clock or SystemClock()
        backoff = self._config.finalizer_backoff
        self._cleaner = ObjectCleaner(client, self._clock, backoff, rng or random.Random())
        self._policy = ObjectMetadataPolicy(self._config, plugin.properties)
        self._refresh = RefreshRegistry()
        self._cache = self._watch_cache() if self._config.watch else None
        self._owns_client = owns_client
        self._unavailable = unavailable

    @property
    def unavailable(self) -> str | None:
        """Why this plugin cannot run tasks here (its client's driver is missing), or None."""
        return self._unavailable

    def validate_task(self, task: TaskSpec) -> None:
        validate_task(self._plugin, task)

    def _watch_cache(self) -> WatchCache:
        retry = self._config.watch_retry_delay
        return WatchCache(self._client, self._clock, self._refresh.notify, MANAGED_SELECTOR, retry)

    @property
    def id(self) -> str:
        return self._id

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties(
            generated_name_max_length=self._plugin.properties.generated_name_max_length
        )

    @property
    def plugin(self) -> K8sPlugin:
        return self._plugin

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        state = _read_state(ctx)
        if state is None:
            return Transition.to(
                PhaseInfo.system_retryable_failure(
                    "CorruptedPluginState",
                    f"plugin state of {self._id} is not version {STATE_VERSION} or cannot be read",
                )
            )
        if state.started:
            info, new_state = await self._check(ctx, state), state
        else:
            info, new_state = await self._launch(ctx, state)
        info = new_state.publish(info)
        new_state = new_state.after(info)
        if new_state != state:
            ctx.state_writer.put(STATE_VERSION, new_state.to_json())
        return Transition.to(info)

    async def _launch(
        self, ctx: TaskExecutionContext, state: ManagerState
    ) -> tuple[PhaseInfo, ManagerState]:
        try:
            manifest = self._policy.apply(await self._plugin.build_resource(ctx), ctx.metadata)
        except Exception as exc:  # a bad task spec: retrying builds the same object
            return PhaseInfo.permanent_failure("FailedToBuildResource", str(exc)), state
        ref = ObjectRef.of(manifest)
        try:
            await self._client.create(manifest)
        except KubeAlreadyExistsError:
            pass  # created by an earlier evaluation that crashed before saving its state
        except KubeApiError as exc:
            return create_failure(exc), state
        self._follow(ref, ctx)
        info = PhaseInfo.queued(reason=SUBMITTED_REASON, info=_task_info(ctx, ref))
        return info, replace(state, started=True, ref=ref)

    async def _check(self, ctx: TaskExecutionContext, state: ManagerState) -> PhaseInfo:
        ref = state.ref or self._ref(ctx)
        self._follow(ref, ctx)
        try:
            resource = await self._read(ref)
        except (KubeNotFoundError, KubeGoneError):
            return PhaseInfo.system_retryable_failure(
                "ResourceDeletedExternally", f"{ref} was deleted by someone other than sluice"
            )
        except KubeApiError as exc:
            return _system_failure("KubeApiError", f"reading {ref} failed: {exc.message}")
        info = self._plugin.get_task_phase(ctx, resource)
        if not info.phase.is_terminal() and is_being_deleted(resource):
            return _system_failure(
                "UnexpectedObjectDeletion", f"{ref} is being deleted but its task has not finished"
            )
        return info

    async def abort(self, ctx: TaskExecutionContext) -> None:
        """Delete the object (whatever the recorded state: a crash may have hidden it), or
        do what the plugin's `on_abort` asks."""
        ref = self._known_ref(ctx)
        behavior = AbortBehavior.delete_resource()
        if isinstance(self._plugin, AbortOverride):
            behavior = await self._plugin.on_abort(ctx, self._identity(ctx, ref))
        await self._cleaner.abort(ref, behavior)

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        """Remove sluice's finalizer (with back-off on Conflict), then delete the object unless
        objects are kept; an object that may still be running is always deleted."""
        state = _read_state(ctx) or ManagerState()
        ref = state.ref or self._ref(ctx)
        self._refresh.unregister(ref)
        await self._cleaner.remove_finalizer(ref)
        if self._should_delete(state):
            await self._cleaner.delete(ref)

    async def close(self) -> None:
        if self._cache is not None:
            await self._cache.close()
        close = getattr(self._client, "close", None)
        if self._owns_client and close is not None:
            await close()

    def _should_delete(self, state: ManagerState) -> bool:
        if (
            self._config.delete_resource_on_finalize
            and not self._plugin.properties.disable_delete_resource_on_finalize
        ):
            return True
        # Kept objects are those that finished on their own; one that may still run is not.
        return not state.phase.is_terminal() or state.cleanup_on_failure

    async def _read(self, ref: ObjectRef) -> Manifest:
        return await (self._cache.get(ref) if self._cache else self._client.get(ref))

    def _follow(self, ref: ObjectRef, ctx: TaskExecutionContext) -> None:
        self._refresh.register(ref, ctx.refresh)
        if self._cache is not None:
            self._cache.watch(ref.kind_ref, ref.namespace)

    def _ref(self, ctx: TaskExecutionContext) -> ObjectRef:
        identity = self._plugin.build_identity_resource(ctx.metadata)
        return ObjectRef(
            str(identity.get("apiVersion", "")),
            str(identity.get("kind", "")),
            self._policy.namespace(ctx.metadata),
            self._policy.object_name(ctx.metadata),
        )

    def _known_ref(self, ctx: TaskExecutionContext) -> ObjectRef:
        state = _read_state(ctx)
        return state.ref if state is not None and state.ref else self._ref(ctx)

    def _identity(self, ctx: TaskExecutionContext, ref: ObjectRef) -> Manifest:
        return addressed(self._plugin.build_identity_resource(ctx.metadata), ref)


def _read_state(ctx: TaskExecutionContext) -> ManagerState | None:
    """The persisted state; a fresh one before the first write; None if it is unreadable."""
    data = ctx.state_reader.get()
    if data is None:
        return ManagerState()
    if ctx.state_reader.state_version != STATE_VERSION:
        return None
    try:
        return ManagerState.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def _task_info(ctx: TaskExecutionContext, ref: ObjectRef) -> TaskInfo:
    return TaskInfo(
        occurred_at=ctx.clock.now(),
        external_id=str(ref),
        custom_info={"namespace": ref.namespace, "name": ref.name},
    )
