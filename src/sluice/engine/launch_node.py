"""A launch plan called as a node of a workflow: the node starts a child execution of the
launch plan, through the one launch path (executions/launch.py), so the launch plan's
concurrency policy governs it (PENDING until the controller promotes it, SKIPPED or
REPLACED as the policy says), then waits for it and takes its outputs.

The child's id is derived from the parent execution and the node (spec/compound.py), and the
creation is an insert that does nothing when the id exists: a node resumed after a crash
between the creation and the write of its own state finds the child it created. The id is
also kept in the node's plugin state. Aborting the node aborts the child.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sluice.clock import Clock
from sluice.engine.bindings import check_outputs
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import SluiceError
from sluice.executions.launch import create_execution, request_abort
from sluice.faults import crash_point
from sluice.plugins.core.phase import PhaseInfo
from sluice.spec import compound as c
from sluice.spec.phases import ExecutionPhase
from sluice.store.notify import Notifier
from sluice.store.records import ExecutionRecord
from sluice.store.store import Store

log = logging.getLogger(__name__)
POLL = 0.5
"""Seconds between two looks at a running child execution."""


class LaunchPlanNodes:
    def __init__(
        self,
        store: Store,
        notifier: Notifier | None,
        clock: Clock,
        wake_at: Callable[[str, str, float], None],
    ) -> None:
        self.store = store
        self.notifier = notifier
        self.clock = clock
        self.wake_at = wake_at
        self.adopt: Callable[[str], None] = lambda execution_id: None
        """Set by an engine limited to some executions, so it drives the children too."""

    async def step(self, ex: ExecutionState, node: NodeState) -> PhaseInfo:
        """Start the child or look at it: RUNNING while it goes on, then SUCCESS (the node's
        outputs written) or a permanent failure naming the child and how it ended."""
        child_id = (node.record.plugin_state or {}).get("execution")
        if child_id is None:
            child_id = await self._launch(ex, node)
        self.adopt(child_id)
        async with self.store.read() as repos:
            child = await repos.executions.get(child_id)
        if child is None:
            return PhaseInfo.permanent_failure("ChildExecutionMissing", f"{child_id} is gone")
        if not child.phase.is_terminal:
            self.wake_at(ex.id, node.id, self.clock.now() + POLL)
            return PhaseInfo.running(1, f"execution {child_id} is {child.phase.value}")
        return self._ended(node, child)

    async def _launch(self, ex: ExecutionState, node: NodeState) -> str:
        call = c.launch_plan_call(node.task)
        child_id = c.child_execution_id(ex.id, node.id)
        await create_execution(
            self.store,
            self.notifier,
            self.clock,
            project=ex.record.project,
            domain=ex.record.domain,
            workflow=call.workflow,
            inputs=node.record.inputs or {},
            launch_plan=call.launch_plan,
            execution_id=child_id,
            options={"parent": {"execution": ex.id, "node": node.id}},
        )
        crash_point("compound.after_child_execution")
        node.record.plugin_state = {"execution": child_id}
        node.record.plugin_state_version = 1
        ex.mark_changed(node)
        return child_id

    def _ended(self, node: NodeState, child: ExecutionRecord) -> PhaseInfo:
        if child.phase is ExecutionPhase.SUCCEEDED:
            where = f"launch plan node {node.id!r}"
            node.record.outputs = check_outputs(node.task.interface, child.outputs, where)
            return PhaseInfo.success(reason=f"execution {child.id} succeeded")
        error: dict[str, Any] = child.error or {}
        message = f"execution {child.id} ended {child.phase.value}"
        detail = error.get("message") or child.reason
        if detail:
            message += f": {detail}"
        return PhaseInfo.permanent_failure("ChildExecution" + child.phase.value.title(), message)

    async def abort(self, node: NodeState, reason: str) -> None:
        child_id = (node.record.plugin_state or {}).get("execution")
        if child_id is None:
            return
        try:
            await request_abort(self.store, self.notifier, self.clock, child_id, reason)
        except SluiceError as exc:  # it ended already, or the store is away: said, not fatal
            log.warning("aborting child execution %s of %s: %s", child_id, node.id, exc)
