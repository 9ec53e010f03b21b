"""How the task handler calls a node's plugin: which plugin, the context it sees, the bound of
each call, and handle() calls that outlast a reconcile's step.

- The plugin: the execution's override for the task type, else the registry's choice.
- The context (NodeContext) is made once per attempt and kept on the node until the attempt's
  finalize (or until a handle() call is abandoned: a call that swallowed its cancellation may
  still write to its context). Each call starts with no outputs and its state unwritten; the
  state is made again if the engine changed the node's plugin state since (a restarted
  attempt starts with none).
- Every call (handle, abort, finalize) is bounded by engine.plugin_call_timeout and, while the
  task's deadline is ahead, by the task's remaining timeout (`limit`).
- A handle() still running after a second (_STEP_BUDGET) goes on in the background and the
  node is stepped again when it returns or overruns, so no plugin holds its execution's
  reconcile (the execution's lock) or a reconcile worker for long; a node never has two
  handle() calls at once.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from sluice.engine.bindings import check_outputs
from sluice.engine.calls import PluginCalls, PluginCallTimeout, start_call
from sluice.engine.context import NodeContext, PendingOutputs, PendingState
from sluice.engine.services import EngineServices, NodeAdmission
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import InputError, PluginNotFoundError
from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.core.phase import ErrorKind, Phase, PhaseInfo, Transition
from sluice.plugins.core.plugin import Plugin

log = logging.getLogger(__name__)
T = TypeVar("T")
_STEP_BUDGET = 1.0
"""Seconds a reconcile waits for one handle() call. A slower call goes on in the background,
bounded all the same, and the node is stepped again when it returns or overruns: a slow or
hung plugin never holds its execution's reconcile (nor a reconcile worker) for longer."""
PENDING = object()
"""What `handle` returns while a handle() call goes on in the background."""


@dataclass
class _HandleCall:
    future: asyncio.Future[PhaseInfo]
    ctx: NodeContext
    plugin_id: str
    until: float
    """Clock time by which the call must have returned."""
    limit: float
    by_task: bool


class PluginInvoker:
    def __init__(self, services: EngineServices, scheduling: NodeAdmission) -> None:
        self.s = services
        self.scheduling = scheduling
        self.calls = PluginCalls()
        self._handles: dict[tuple[str, str], _HandleCall] = {}
        """handle() calls still running in the background, by (execution id, node id)."""

    def plugin_for(self, ex: ExecutionState, node: NodeState) -> Plugin:
        overrides = ex.record.options.get("plugin_overrides", {}).get(node.task.type, ())
        return self.s.registry.resolve(node.task.type, overrides)

    def context(self, ex: ExecutionState, node: NodeState, plugin_id: str) -> NodeContext:
        """The attempt's context, ready for one more call."""
        rec = node.record
        kept = node.context
        if kept is None or kept.plugin_id != plugin_id or kept.metadata.attempt != rec.attempt:
            kept = self._new_context(ex, node, plugin_id)
            node.context = kept
            return kept
        kept.outputs = PendingOutputs()
        state = kept.state
        if state.value is not rec.plugin_state or state.state_version != rec.plugin_state_version:
            kept.state = PendingState(rec.plugin_state_version, rec.plugin_state)
        else:
            state.written = False
        return kept

    def _new_context(self, ex: ExecutionState, node: NodeState, plugin_id: str) -> NodeContext:
        rec = node.record
        meta = TaskExecutionMetadata(
            execution_id=ex.id,
            project=ex.record.project,
            domain=ex.record.domain,
            node_id=node.id,
            attempt=rec.attempt,
            task_name=node.task.name,
            max_attempts=node.task.metadata.retries + 1,
            interruptible=node.task.metadata.interruptible,
            engine_id=self.s.engine_id,
            fencing_token=f"{ex.id}/{node.id}@{ex.record.owner_epoch}",
            labels={"execution-id": ex.id, "node-id": node.id},
        )
        return NodeContext(
            metadata=meta,
            task=node.task,
            inputs=rec.inputs or {},
            state=PendingState(rec.plugin_state_version, rec.plugin_state),
            resource_manager=lambda: self.scheduling.resource_manager(plugin_id, ex.id, node.id),
            secrets=self.s.secrets,
            clock=self.s.clock,
            refresh=lambda: self.scheduling.refresh(ex.id, node.id),
            log_writer=self.s.logs.writer(ex.id, node.id, rec.attempt) if self.s.logs else None,
            plugin_id=plugin_id,
        )

    @staticmethod
    def forget_context(node: NodeState) -> None:
        """The attempt is over (or its context may be written by an abandoned call)."""
        node.context = None

    async def handle(self, ex: ExecutionState, node: NodeState) -> PhaseInfo | object | None:
        """What the plugin's handle() reports; None when the task's deadline cut it short;
        PENDING while the call goes on in the background (within its bound)."""
        key = (ex.id, node.id)
        call = self._handles.pop(key, None)
        if call is None:
            try:
                plugin = self.plugin_for(ex, node)
            except PluginNotFoundError as exc:
                return PhaseInfo.permanent_failure("PluginNotFound", str(exc), ErrorKind.SYSTEM)
            limit, by_task = self.limit(node, "handle")
            if limit <= 0:
                return None
            ctx = self.context(ex, node, plugin.id)
            inline = plugin.properties.inline_calls
            future = await start_call(self._handle(plugin, ctx), inline)
            until = self.s.clock.now() + limit
            call = _HandleCall(future, ctx, plugin.id, until, limit, by_task)
            try:
                if not future.done():
                    await asyncio.wait({future}, timeout=min(limit, _STEP_BUDGET))
            except asyncio.CancelledError:
                future.cancel()
                raise
            if not future.done() and limit > _STEP_BUDGET:
                self._handles[key] = call
                future.add_done_callback(lambda _: self.scheduling.refresh(ex.id, node.id))
                self.scheduling.wake_at(ex.id, node.id, until)
                return PENDING
        elif not call.future.done() and self.s.clock.now() < call.until:
            self._handles[key] = call
            return PENDING
        return self._handled(ex, node, call)

    @staticmethod
    async def _handle(plugin: Plugin, ctx: NodeContext) -> PhaseInfo:
        transition = await plugin.handle(ctx)
        if not isinstance(transition, Transition):
            raise TypeError(f"handle() returned {transition!r}, not a Transition")
        return transition.info

    def _handled(self, ex: ExecutionState, node: NodeState, call: _HandleCall) -> PhaseInfo | None:
        """The outcome of a handle() call that returned, raised or overran its bound."""
        future, plugin_id = call.future, call.plugin_id
        if not future.done():
            self.abandon(node, future)
            exc = PluginCallTimeout("handle", call.limit, call.by_task)
            log.warning("plugin %s on %s/%s: %s", plugin_id, ex.id, node.id, exc)
            if call.by_task:
                return None
            info = PhaseInfo.system_retryable_failure(
                "PluginTimeout", f"plugin {plugin_id!r} {exc}"
            )
        elif future.cancelled():
            info = PhaseInfo.system_retryable_failure(
                "PluginError", f"plugin {plugin_id!r}: handle() was cancelled"
            )
        elif (error := future.exception()) is not None:
            log.warning("plugin %s failed on %s/%s: %r", plugin_id, ex.id, node.id, error)
            text = "".join(traceback.format_exception(error))
            info = PhaseInfo.system_retryable_failure(
                "PluginError", f"plugin {plugin_id!r} raised {error!r}\n{text}"
            )
        else:
            info = future.result()
        ctx = call.ctx
        if ctx.state.written:
            node.record.plugin_state = ctx.state.value
            node.record.plugin_state_version = ctx.state.state_version
            ex.mark_changed(node)
        if info.phase is Phase.SUCCESS:
            info = self._take_outputs(node, ctx.outputs.values, info)
        return info

    def drop(self, ex: ExecutionState, node: NodeState) -> None:
        """Cancel a handle() call still running in the background: the attempt is over."""
        call = self._handles.pop((ex.id, node.id), None)
        if call is not None:
            self.abandon(node, call.future)

    def abandon(self, node: NodeState, future: asyncio.Future[PhaseInfo]) -> None:
        self.calls.abandon(future, "handle")
        self.forget_context(node)  # the call may still write to it

    @staticmethod
    def _take_outputs(
        node: NodeState, written: dict[str, object] | None, info: PhaseInfo
    ) -> PhaseInfo:
        try:
            node.record.outputs = check_outputs(
                node.task.interface, written, f"task {node.task.name!r}"
            )
        except InputError as exc:
            return PhaseInfo.permanent_failure("OutputsError", str(exc))
        return info

    async def call(self, ex: ExecutionState, node: NodeState, method: str) -> None:
        """The plugin's abort or finalize, within its bound; a failure or overrun is logged."""
        try:
            plugin = self.plugin_for(ex, node)
            ctx = self.context(ex, node, plugin.id)
            call = getattr(plugin, method)
            await self.bounded(node, method, lambda: call(ctx), plugin.properties.inline_calls)
        except PluginNotFoundError:
            return
        except PluginCallTimeout as exc:
            log.warning("plugin %s of %s/%s: %s", method, ex.id, node.id, exc)
        except Exception:
            log.warning("plugin %s of %s/%s failed", method, ex.id, node.id, exc_info=True)

    async def bounded(
        self, node: NodeState, method: str, call: Callable[[], Awaitable[T]], inline: bool = False
    ) -> T:
        """Run one plugin call within its bound (`limit`): see engine/calls.py."""
        limit, by_task = self.limit(node, method)
        return await self.calls.bounded(call, method, limit, by_task, inline)

    def limit(self, node: NodeState, method: str) -> tuple[float, bool]:
        """(seconds, cut by the task's deadline) allowed to one call: the cap, or the time left
        to the task when less; 0 for a handle() once the deadline has passed. A cleanup call
        after the deadline gets the cap: it must have its chance to stop remote work."""
        cap = self.s.config.plugin_call_timeout
        deadline = self.deadline(node)
        if deadline is None:
            return cap, False
        left = deadline - self.s.clock.now()
        if left <= 0:
            return (0.0, True) if method == "handle" else (cap, False)
        return (left, True) if left < cap else (cap, False)

    @staticmethod
    def deadline(node: NodeState) -> float | None:
        timeout = node.task.metadata.timeout
        started = node.record.attempt_started_at
        return None if timeout is None or started is None else started + timeout
