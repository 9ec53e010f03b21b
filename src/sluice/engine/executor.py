"""One reconcile pass over one execution: start ready nodes, step running ones, propagate
completion, fail or abort, and persist everything in one transaction."""

from __future__ import annotations

import asyncio
import logging

from sluice.cancellation import reraise_cancellation
from sluice.clock import store_now
from sluice.engine import on_failure
from sluice.engine.bindings import resolve, resolve_inputs
from sluice.engine.cache_gate import NO_CACHE
from sluice.engine.claims import NO_CLAIMS
from sluice.engine.compound import CompoundNodes
from sluice.engine.handler import TaskHandler
from sluice.engine.launch_node import LaunchPlanNodes
from sluice.engine.services import EngineServices, NodeAdmission, NodeCache, NodeClaims
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import InputError
from sluice.faults import crash_point
from sluice.plugins.core.phase import PhaseInfo
from sluice.spec.compound import is_compound
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.reconcile_writes import ReconcileWrites, WriteOutcome
from sluice.store.records import EventRecord
from sluice.store.store import Repos, Store

log = logging.getLogger(__name__)
_UNSUCCESSFUL = (NodePhase.FAILED, NodePhase.ABORTED, NodePhase.SKIPPED)


class LostOwnership(Exception):
    """Another engine holds the execution now; this one must drop it."""


class ExecutionDriver:
    def __init__(
        self,
        services: EngineServices,
        scheduling: NodeAdmission,
        store: Store,
        notifier: Notifier | None,
        cache: NodeCache = NO_CACHE,
        claims: NodeClaims = NO_CLAIMS,
    ) -> None:
        self.s = services
        self.store = store
        self.notifier = notifier
        self.handler = TaskHandler(services, scheduling, cache, claims)
        launches = LaunchPlanNodes(store, notifier, services.clock, scheduling.wake_at)
        self.compound = CompoundNodes(self.handler, launches)
        self._steps = asyncio.Semaphore(64)
        self._writes = ReconcileWrites.for_database(store.db)

    async def reconcile(self, ex: ExecutionState) -> None:
        async with ex.lock:
            if ex.record.phase.is_terminal and not (ex.todo or ex.changed or ex.events):
                return  # ended by the reconcile this one waited for: nothing left to do
            if ex.record.phase is ExecutionPhase.QUEUED:
                self._set_phase(ex, ExecutionPhase.RUNNING, started_at=self.s.clock.now())
                # Written alone, so that the first nodes' writes (every node of a fan-out)
                # take the compiled path of a reconcile that leaves the phase as it is.
                await self._store(ex)
            if ex.record.phase in (ExecutionPhase.ABORTING, ExecutionPhase.FAILING):
                await self._stop_all(ex)
            else:
                await self._evaluate_todo(ex)
            self._complete_if_done(ex)
            await self.persist(ex)

    async def fail(self, ex: ExecutionState, message: str) -> None:
        """Give up on an execution that cannot be reconciled: stop its nodes (a node whose
        stop fails is marked ABORTED anyway), FAIL it with `message` as its error and an
        event, and persist. If writing the nodes fails too, the phase and event are written
        alone, so the execution never stays active in the store because of a bad node."""
        async with ex.lock:
            ex.todo.clear()
            reason = "stopped: the execution could not be reconciled"
            for node in [n for n in ex.nodes.values() if not n.record.phase.is_terminal]:
                try:
                    await self.compound.abort(ex, node, reason)
                except Exception as exc:
                    reraise_cancellation()
                    log.warning("stopping %s/%s failed: %s", ex.id, node.id, exc)
                if not node.record.phase.is_terminal:
                    self._end_node(ex, node, NodePhase.ABORTED)
            error = {"code": "ReconcileFailed", "message": message, "kind": "SYSTEM"}
            self._set_phase(ex, ExecutionPhase.FAILED, error=error, reason=message)
            try:
                await self.persist(ex)
            except LostOwnership:
                raise
            except Exception:
                reraise_cancellation()
                ex.changed.clear()
                await self.persist(ex)

    async def _evaluate_todo(self, ex: ExecutionState) -> None:
        while ex.todo and not ex.record.phase.is_terminal:
            batch = [ex.nodes[node_id] for node_id in ex.todo]
            ex.todo.clear()
            if len(batch) == 1:  # a chain's step: no task to wrap it in
                await self._evaluate(ex, batch[0])
            else:
                await asyncio.gather(*(self._evaluate(ex, node) for node in batch))
            if ex.record.phase is ExecutionPhase.FAILING:
                await self._stop_all(ex)
                return

    async def _evaluate(self, ex: ExecutionState, node: NodeState) -> None:
        before = node.record.phase
        if before is NodePhase.NOT_STARTED and not self._start(ex, node):
            return
        if node.record.phase is NodePhase.RUNNING and is_compound(node.task):
            await self.compound.step(ex, node)
        elif node.record.phase is NodePhase.RUNNING:
            async with self._steps:
                await self.handler.step(ex, node)
        if node.record.phase.is_terminal and not before.is_terminal:
            self._propagate(ex, node)

    def _start(self, ex: ExecutionState, node: NodeState) -> bool:
        """Move a node whose upstream all succeeded to RUNNING with its inputs bound (a
        failure handler: once the execution failed and all else stopped, engine/on_failure)."""
        handler = on_failure.is_handler(ex, node)
        ready = on_failure.may_start(ex, node) if handler else not node.waiting_on
        unsuccessful = any(ex.nodes[d].record.phase in _UNSUCCESSFUL for d in node.dependencies)
        if ready is None or (unsuccessful and not handler):
            why = "the workflow did not fail" if handler else "an upstream node did not succeed"
            self.handler.record(ex, node, PhaseInfo.aborted(0, f"skipped: {why}"))
            self._end_node(ex, node, NodePhase.SKIPPED)
            return True
        if not ready:
            return False
        rec = node.record
        now = self.s.clock.now()
        try:
            rec.inputs = resolve_inputs(
                node.task.interface,
                node.spec.inputs,
                ex.record.inputs,
                ex.outputs_by_node(),
                f"node {node.id!r}",
            )
        except InputError as exc:
            rec.error = {"code": "BadInputs", "message": str(exc), "kind": "USER"}
            self._end_node(ex, node, NodePhase.FAILED)
            return True
        error_input = ex.workflow.on_failure.error_input if ex.workflow.on_failure else ""
        if handler and error_input:
            rec.inputs = {**rec.inputs, error_input: on_failure.failure_value(ex)}
        rec.phase, rec.started_at, rec.updated_at = NodePhase.RUNNING, now, now
        ex.mark_changed(node)
        return True

    def _end_node(self, ex: ExecutionState, node: NodeState, phase: NodePhase) -> None:
        node.record.phase = phase
        node.record.ended_at = self.s.clock.now()
        ex.mark_changed(node)

    def _propagate(self, ex: ExecutionState, node: NodeState) -> None:
        for child in ex.dependents.get(node.id, ()):
            if node.record.phase is NodePhase.SUCCEEDED:
                ex.nodes[child].waiting_on.discard(node.id)
            ex.todo.add(child)
        failed = node.record.phase is NodePhase.FAILED and node.parent is None  # else its parent's
        if failed and not ex.record.phase.is_terminal:
            self._set_phase(ex, ExecutionPhase.FAILING, reason=f"node {node.id!r} failed")

    async def _stop_all(self, ex: ExecutionState) -> None:
        reason = ex.record.reason or "execution aborted"
        failing = ex.record.phase is ExecutionPhase.FAILING
        handler = on_failure.handler_of(ex) if failing else None  # it runs once all stopped
        active = [n for n in ex.nodes.values() if not n.record.phase.is_terminal]
        top = [n for n in active if n.parent is None and n is not handler]  # children: parent's
        await asyncio.gather(*(self.compound.abort(ex, n, reason) for n in top))
        ex.todo.clear()
        if handler is not None and not handler.record.phase.is_terminal:
            await self._evaluate(ex, handler)

    def _complete_if_done(self, ex: ExecutionState) -> None:
        if ex.record.phase.is_terminal or not ex.all_terminal():
            return
        top = [n for n in ex.nodes.values() if n.parent is None]  # children count in their parent
        failed = sorted(
            (n for n in top if n.record.phase is NodePhase.FAILED),
            key=lambda n: n.record.ended_at or 0,
        )
        aborted = any(n.record.phase is NodePhase.ABORTED for n in top)
        if failed:
            error = {"node": failed[0].id, **(failed[0].record.error or {})}
            self._set_phase(ex, ExecutionPhase.FAILED, error=error)
        elif aborted or ex.record.phase is ExecutionPhase.ABORTING:
            self._set_phase(ex, ExecutionPhase.ABORTED)
        else:
            self._succeed(ex)

    def _succeed(self, ex: ExecutionState) -> None:
        produced = ex.outputs_by_node()
        try:
            outputs = {
                name: resolve(b, ex.record.inputs, produced)
                for name, b in ex.workflow.outputs.items()
            }
        except InputError as exc:
            self._set_phase(
                ex,
                ExecutionPhase.FAILED,
                error={"code": "OutputsError", "message": str(exc), "kind": "SYSTEM"},
            )
            return
        self._set_phase(ex, ExecutionPhase.SUCCEEDED, outputs=outputs)

    def _set_phase(self, ex: ExecutionState, phase: ExecutionPhase, **fields: object) -> None:
        rec = ex.record
        now = self.s.clock.now()
        rec.phase, rec.updated_at = phase, now
        if phase.is_terminal:
            rec.ended_at = now
            if self.s.counters is not None:
                self.s.counters.finished(phase.value)
        for key, value in fields.items():
            setattr(rec, key, value)
        ex.execution_changed = True
        ex.events.append(
            EventRecord(
                execution_id=ex.id,
                phase=phase.value,
                occurred_at=now,
                reason=str(fields.get("reason", "")),
            )
        )

    async def persist(self, ex: ExecutionState) -> None:
        """Write changed nodes, new events and the execution's phase in one transaction,
        each node a compare-and-swap on its version, under this engine's ownership."""
        if await self._store(ex):
            crash_point("engine.after_persist")

    async def _store(self, ex: ExecutionState) -> bool:
        """persist without its crash point; False when there was nothing to write."""
        if not (ex.changed or ex.events or ex.execution_changed):
            return False
        inserts = any(not ex.nodes[node_id].stored for node_id in ex.changed)  # new children
        if self._writes is not None and not ex.execution_changed and not inserts:
            await self._write_nodes(ex)
        else:
            await self._write_all(ex)
        for node_id in ex.changed:
            ex.nodes[node_id].stored = True
        ex.changed.clear()
        ex.events.clear()
        ex.execution_changed = False
        return True

    async def _write_nodes(self, ex: ExecutionState) -> None:
        """The common reconcile (nodes and events, the execution's phase unchanged) on
        SQLite: the same statements as _write_all, compiled once, in one transaction run
        without a trip to the driver's thread when it can (store/reconcile_writes.py)."""
        assert self._writes is not None
        changed = [ex.nodes[node_id].record for node_id in sorted(ex.changed)]
        fence = (ex.id, self.s.engine_id, ex.record.owner_epoch, store_now(self.s.clock))
        outcome = await self._writes.write(
            *fence, self.s.config.execution_lease, changed, ex.events
        )
        if outcome is WriteOutcome.LEASE_LOST:
            raise LostOwnership(ex.id)
        if outcome is WriteOutcome.NODE_CHANGED:
            raise LostOwnership(f"{ex.id}: a node was changed by another engine")

    async def _write_all(self, ex: ExecutionState) -> None:
        async with self.store.write() as repos:
            fence = (ex.id, self.s.engine_id, ex.record.owner_epoch, store_now(self.s.clock))
            if not await repos.executions.hold(*fence, self.s.config.execution_lease):
                raise LostOwnership(ex.id)
            changed = [ex.nodes[node_id] for node_id in sorted(ex.changed)]
            await repos.nodes.insert_many([n.record for n in changed if not n.stored])
            if not await repos.nodes.update_many([n.record for n in changed if n.stored]):
                raise LostOwnership(f"{ex.id}: a node was changed by another engine")
            await repos.events.append(ex.events)
            if ex.execution_changed:
                await self._write_phase(repos, ex)

    async def _write_phase(self, repos: Repos, ex: ExecutionState) -> None:
        rec = ex.record
        stored = await repos.executions.get(ex.id)
        if stored is None:
            raise LostOwnership(ex.id)
        if stored.phase is ExecutionPhase.ABORTING and rec.phase in (
            ExecutionPhase.RUNNING,
            ExecutionPhase.FAILING,
        ):
            rec.phase = ExecutionPhase.ABORTING  # an abort arrived while we ran: honour it
            ex.todo.update(ex.nodes)
            return
        await repos.executions.compare_and_set_phase(
            ex.id,
            [stored.phase],
            rec.phase,
            rec.updated_at,
            reason=rec.reason,
            started_at=rec.started_at,
            ended_at=rec.ended_at,
            outputs=rec.outputs,
            error=rec.error,
        )
        if rec.phase.is_terminal and self.notifier is not None:
            await self.notifier.publish(repos.conn, EXECUTIONS_CHANNEL, ex.id)
