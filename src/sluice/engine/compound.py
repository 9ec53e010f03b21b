"""Compound nodes in the engine: map tasks and dynamic workflows (spec/compound.py).

A compound node never reaches a plugin. While RUNNING it creates child nodes, ordinary nodes
the task handler drives (cache, admission, quotas, locks, attempts), and it ends when they
have: a map node when at least its share of items succeeded, a dynamic node when every node
of the workflow it built did. A child's end re-evaluates its parent (the parent is a
dependent of each child); a failed child fails its parent, never the execution directly.

Storage: a child's row is created when the child is (a map creates at most `concurrency`
ahead of the finished ones), written in the same transaction as the parent's progress, and
nothing else is stored: children are derived again from the parent's inputs (map) or from
the build child's outputs (dynamic) when an engine loads the execution (`restore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice.engine import lifecycle
from sluice.engine.bindings import check_outputs, resolve
from sluice.engine.gates import GateNodes
from sluice.engine.handler import TaskHandler
from sluice.engine.launch_node import LaunchPlanNodes
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import InputError, SluiceError
from sluice.plugins.core.phase import Phase, PhaseInfo
from sluice.spec import compound as c
from sluice.spec.gates import GATE_TYPE
from sluice.spec.models import NodeSpec, TaskSpec
from sluice.spec.phases import NodePhase
from sluice.spec.validate import dependencies, topological_order
from sluice.store.records import NodeRecord


class CompoundNodes:
    """Steps map and dynamic nodes; `handler` records their phases and stops their children."""

    def __init__(self, handler: TaskHandler, launches: LaunchPlanNodes) -> None:
        self.handler = handler
        self.launches = launches
        self.gates = GateNodes(launches.store, launches.clock, launches.wake_at)

    async def step(self, ex: ExecutionState, node: NodeState) -> None:
        try:
            if node.task.type == c.MAP_TYPE:
                await self._step_map(ex, node)
            elif node.task.type == c.DYNAMIC_TYPE:
                await self._step_dynamic(ex, node)
            elif node.task.type == GATE_TYPE:
                await self._step_waiting(ex, node, await self.gates.step(ex, node))
            else:
                await self._step_waiting(ex, node, await self.launches.step(ex, node))
        except (SluiceError, InputError, KeyError, ValueError) as exc:
            await self._fail(ex, node, "CompoundNodeError", str(exc))

    async def abort(self, ex: ExecutionState, node: NodeState, reason: str) -> None:
        """Abort a node: a compound node's children first, a launch plan node's execution."""
        for child_id in node.children:
            child = ex.nodes[child_id]
            if not child.record.phase.is_terminal:
                await self.abort(ex, child, reason)
        if node.task.type == c.LAUNCH_PLAN_TYPE and not node.record.phase.is_terminal:
            await self.launches.abort(node, reason)
        await self.handler.abort(ex, node, reason)

    async def _step_waiting(self, ex: ExecutionState, node: NodeState, info: PhaseInfo) -> None:
        """A launch plan node's or a gate's step: recorded, and the node ended if it did."""
        if not info.phase.is_terminal():
            self.handler.record(ex, node, info)
            return
        if info.error is not None:
            node.record.error = info.error.to_json()
        self._end(ex, node, info)

    # map
    async def _step_map(self, ex: ExecutionState, node: NodeState) -> None:
        options = c.map_options(node.task)
        inputs = node.record.inputs or {}
        total = options.total(inputs, f"map node {node.id!r}")
        tally = _tally(ex, node)
        need = options.required(total)
        if tally.failed > total - need:
            why = f"{tally.failed} of {total} items failed; {need} must succeed"
            children = [ex.nodes[i] for i in node.children]
            await self._fail(ex, node, "MapItemsFailed", why + _first_failure(children))
            return
        limit = options.concurrency or total
        while len(tally.active) < limit and len(node.children) < total:
            spec = c.map_child_spec(node.spec, options, inputs, len(node.children))
            tally.active.add(add_child(ex, node, spec, options.task).id)
        if tally.ok + tally.failed == total:
            self._succeed_map(ex, node, [ex.nodes[i] for i in node.children])
            return
        reason = (
            f"{tally.ok}/{total} items succeeded, {tally.failed} failed, {len(tally.active)} active"
        )
        self.handler.record(ex, node, PhaseInfo.running(0, reason))

    def _succeed_map(self, ex: ExecutionState, node: NodeState, children: list[NodeState]) -> None:
        names = list(node.task.interface.outputs)
        outputs: dict[str, list[Any]] = {name: [] for name in names}
        for child in children:
            produced = child.record.outputs if child.record.phase is NodePhase.SUCCEEDED else None
            for name in names:
                outputs[name].append(None if produced is None else produced.get(name))
        ok = sum(1 for n in children if n.record.phase is NodePhase.SUCCEEDED)
        node.record.outputs = outputs
        self._end(ex, node, PhaseInfo.success(reason=f"{ok}/{len(children)} items succeeded"))

    # dynamic
    async def _step_dynamic(self, ex: ExecutionState, node: NodeState) -> None:
        build_id = node.id + c.BUILD_SUFFIX
        build = ex.nodes.get(build_id)
        if build is None:
            spec = c.build_child_spec(node.spec, node.task, node.record.inputs or {})
            add_child(ex, node, spec, c.build_task(node.task))
            self.handler.record(ex, node, PhaseInfo.running(0, "building the workflow"))
            return
        if not build.record.phase.is_terminal:
            return
        if build.record.phase is not NodePhase.SUCCEEDED:
            await self._fail_by_child(ex, node, build)
            return
        built = c.built_workflow(build.record.outputs, f"dynamic node {node.id!r}")
        if len(node.children) == 1:
            add_built(ex, node, built.tasks, c.dynamic_child_specs(node.id, built))
        children = [ex.nodes[i] for i in node.children[1:]]
        failed = next((n for n in children if n.record.phase is NodePhase.FAILED), None)
        if failed is not None:
            await self._fail_by_child(ex, node, failed)
            return
        ended = sum(1 for n in children if n.record.phase.is_terminal)
        if ended < len(children):
            reason = f"{ended}/{len(children)} nodes of the built workflow ended"
            self.handler.record(ex, node, PhaseInfo.running(1, reason))
            return
        produced = ex.outputs_by_node()
        values = {
            name: resolve(c.rebase(binding, node.id), {}, produced)
            for name, binding in built.outputs.items()
        }
        where = f"dynamic task {node.task.name!r}"
        node.record.outputs = check_outputs(node.task.interface, values, where)
        self._end(ex, node, PhaseInfo.success(reason=f"{len(children)} nodes succeeded"))

    async def _fail_by_child(self, ex: ExecutionState, node: NodeState, child: NodeState) -> None:
        error = child.record.error or {}
        message = f"node {child.id!r} {child.record.phase.value.lower()}"
        if error.get("message"):
            message += f": {error['message']}"
        await self._fail(ex, node, str(error.get("code", "ChildFailed")), message)

    # both
    async def _fail(self, ex: ExecutionState, node: NodeState, code: str, message: str) -> None:
        """Stop the children still going and fail the node."""
        reason = f"stopped: {node.id!r} failed"
        for child_id in node.children:
            child = ex.nodes[child_id]
            if not child.record.phase.is_terminal:
                await self.abort(ex, child, reason)
        info = PhaseInfo.permanent_failure(code, message)
        node.record.error = info.error.to_json() if info.error else None
        self._end(ex, node, info)

    def _end(self, ex: ExecutionState, node: NodeState, info: PhaseInfo) -> None:
        self.handler.record(ex, node, info)
        phase = NodePhase.SUCCEEDED if info.phase is Phase.SUCCESS else NodePhase.FAILED
        lifecycle.end(node, phase, self.handler.s.clock.now())
        ex.mark_changed(node)


@dataclass
class _Tally:
    """A map node's children: how many succeeded, how many ended otherwise, which are active."""

    ok: int = 0
    failed: int = 0
    active: set[str] = field(default_factory=set)


def _tally(ex: ExecutionState, node: NodeState) -> _Tally:
    """The node's tally, brought up to date by looking at its active children only (all of
    them the first time, e.g. after an engine loaded the execution)."""
    tally = node.tally
    if not isinstance(tally, _Tally):
        tally = node.tally = _Tally(active=set(node.children))
    for child_id in [i for i in tally.active if ex.nodes[i].record.phase.is_terminal]:
        tally.active.discard(child_id)
        if ex.nodes[child_id].record.phase is NodePhase.SUCCEEDED:
            tally.ok += 1
        else:
            tally.failed += 1
    return tally


def _first_failure(children: list[NodeState]) -> str:
    """'; first: NODE: last line of its error', naming why the first failed item failed."""
    for child in children:
        if child.record.phase is not NodePhase.SUCCEEDED and child.record.phase.is_terminal:
            lines = str((child.record.error or {}).get("message", "")).strip().splitlines()
            return f"; first: {child.id}: {lines[-1] if lines else child.record.phase.value}"
    return ""


def add_child(
    ex: ExecutionState,
    parent: NodeState,
    spec: NodeSpec,
    task: TaskSpec,
    record: NodeRecord | None = None,
) -> NodeState:
    """Make `spec` a node of the execution under `parent`; a new one (no `record`) is written
    with the next persist. Its upstream nodes must be in the execution already."""
    deps = dependencies(spec)
    waiting = {d for d in deps if ex.nodes[d].record.phase is not NodePhase.SUCCEEDED}
    rec = record or NodeRecord(ex.id, spec.id)
    child = NodeState(spec, task, rec, waiting, frozenset(deps), parent=parent.id)
    child.stored = record is not None
    ex.nodes[spec.id] = child
    parent.children.append(spec.id)
    for dep in deps:
        ex.dependents.setdefault(dep, []).append(spec.id)
    ex.dependents.setdefault(spec.id, []).append(parent.id)
    if not rec.phase.is_terminal:
        ex.todo.add(spec.id)
    if record is None:
        ex.mark_changed(child)
    return child


def add_built(
    ex: ExecutionState,
    parent: NodeState,
    tasks: dict[str, TaskSpec],
    specs: Sequence[NodeSpec],
    records: dict[str, NodeRecord] | None = None,
) -> None:
    """Add a built workflow's nodes under a dynamic parent, upstream nodes first."""
    by_id = {s.id: s for s in specs}
    order = topological_order_of(by_id)
    for node_id in order:
        spec = by_id[node_id]
        add_child(ex, parent, spec, tasks[spec.task], (records or {}).get(node_id))


def topological_order_of(specs: dict[str, NodeSpec]) -> list[str]:
    from sluice.spec.models import WorkflowSpec

    return topological_order(WorkflowSpec(name="built", version=""), specs)


def restore(ex: ExecutionState, records: Sequence[NodeRecord]) -> None:
    """Rebuild the children of the execution's running compound nodes from the stored rows,
    when an engine loads it."""
    stored = {r.node_id: r for r in records if r.node_id not in ex.nodes}
    if not stored:
        return
    pending = [n for n in list(ex.nodes.values()) if c.is_compound(n.task)]
    while pending:
        node = pending.pop()
        if node.record.phase is not NodePhase.RUNNING:
            continue
        before = len(node.children)
        _restore_children(ex, node, stored)
        pending.extend(
            ex.nodes[i] for i in node.children[before:] if c.is_compound(ex.nodes[i].task)
        )


def _restore_children(ex: ExecutionState, node: NodeState, stored: dict[str, NodeRecord]) -> None:
    inputs = node.record.inputs or {}
    if node.task.type == c.MAP_TYPE:
        options = c.map_options(node.task)
        index = 0
        while (record := stored.get(c.map_child_id(node.id, index))) is not None:
            spec = c.map_child_spec(node.spec, options, inputs, index)
            add_child(ex, node, spec, options.task, record)
            index += 1
        return
    build = stored.get(node.id + c.BUILD_SUFFIX)
    if build is None:
        return
    add_child(
        ex, node, c.build_child_spec(node.spec, node.task, inputs), c.build_task(node.task), build
    )
    if build.phase is not NodePhase.SUCCEEDED:
        return
    built = c.built_workflow(build.outputs, f"dynamic node {node.id!r}")
    specs = c.dynamic_child_specs(node.id, built)
    if all(s.id in stored for s in specs):
        add_built(ex, node, built.tasks, specs, stored)
