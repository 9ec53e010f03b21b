"""sluice executions as flyteadmin shows them: which Flyte launch plan (or task) each runs,
with the Flyte interface its values are typed by, and its nodes as Flyte's node executions.

An execution created through the gRPC API names its Flyte entity in its options; one created
otherwise (a schedule's firing, a launch plan node's child, `sluice run`) is matched to the
ACTIVE (else the latest) Flyte launch plan version of its launch plan's name, if there is one.

Nodes follow the Flyte workflow's template, not sluice's node list: a task node is the sluice
node of the same id; a map (array node) is the sluice map node; a launch plan node names the
child execution it started; a sub-workflow node, which sluice inlines as `{node}-{its node}`,
is a parent whose phase is its children's; a branch is a parent whose child is the case taken
(sluice's `{node}.{then node}`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice.errors import NotFoundError
from sluice.service.flyte.graph import FlyteId, parse
from sluice.service.flyte.launching import target_of
from sluice.spec.phases import NodePhase
from sluice.store.flyte_entities import ACTIVE, LAUNCH_PLAN, TASK, WORKFLOW, FlyteEntityRepository
from sluice.store.records import ExecutionRecord, NodeRecord
from sluice.store.store import Repos

START_NODES = ("", "start-node", "end-node")


@dataclass(frozen=True)
class FlyteExecution:
    record: ExecutionRecord
    target: FlyteId | None
    """The Flyte launch plan (or task) run; None for an execution Flyte knows nothing of."""
    workflow: FlyteId | None
    interface: Any | None
    """The Flyte TypedInterface of the inputs and outputs."""
    template: Any | None = None
    """The Flyte workflow template (None for a task)."""
    sub_workflows: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FlyteNode:
    node_id: str
    """The sluice node id, which is the Flyte node execution's id."""
    spec_node_id: str
    """The node's id in its (sub-)workflow template."""
    kind: str
    """task, array, launch_plan, workflow (a sub-workflow) or branch."""
    record: NodeRecord
    task: FlyteId | None = None
    interface: Any | None = None
    child_execution: str | None = None
    parent: str = ""

    @property
    def is_parent(self) -> bool:
        return self.kind in ("workflow", "branch")


async def flyte_execution(repos: Repos, record: ExecutionRecord) -> FlyteExecution:
    flyte = FlyteEntityRepository(repos.conn)
    target = target_of(record) or await _launch_plan_of(flyte, record)
    if target is None:
        return FlyteExecution(record, None, None, None)
    stored = await flyte.get(*target.key)
    if stored is None:
        return FlyteExecution(record, None, None, None)
    spec = parse(target.kind, stored.spec)
    if target.kind == TASK:
        return FlyteExecution(record, target, None, spec.template.interface)
    workflow = FlyteId.of(WORKFLOW, spec.workflow_id)
    found = await flyte.get(*workflow.key)
    if found is None:
        return FlyteExecution(record, target, workflow, None)
    workflow_spec = parse(WORKFLOW, found.spec)
    template = workflow_spec.template
    subs = {w.id.name: w for w in workflow_spec.sub_workflows}
    return FlyteExecution(record, target, workflow, template.interface, template, subs)


async def _launch_plan_of(flyte: FlyteEntityRepository, record: ExecutionRecord) -> FlyteId | None:
    if record.launch_plan is None:
        return None
    versions = await flyte.list(
        LAUNCH_PLAN, record.project, record.domain, record.launch_plan, state=ACTIVE, limit=1
    )
    versions = versions or await flyte.list(
        LAUNCH_PLAN, record.project, record.domain, record.launch_plan, limit=1
    )
    if not versions:
        return None
    found = versions[0]
    return FlyteId(LAUNCH_PLAN, found.project, found.domain, found.name, found.version)


async def flyte_nodes(repos: Repos, execution: FlyteExecution, parent: str = "") -> list[FlyteNode]:
    """The node executions of `execution` under `parent` ("": the workflow's own nodes),
    those that started only."""
    records = {n.node_id: n for n in await repos.nodes.list(execution.record.id)}
    if execution.template is None:
        return [_plain(r) for r in records.values() if r.phase is not NodePhase.NOT_STARTED]
    flyte = FlyteEntityRepository(repos.conn)
    template, prefix = _scope(execution, parent)
    found = []
    for node in template.nodes:
        if node.id in START_NODES:
            continue
        view = await _node(flyte, execution, node, prefix, records, parent)
        if view is not None and view.record.phase is not NodePhase.NOT_STARTED:
            found.append(view)
    return found


def _plain(record: NodeRecord) -> FlyteNode:
    return FlyteNode(record.node_id, record.node_id, "task", record)


def _scope(execution: FlyteExecution, parent: str) -> tuple[Any, str]:
    """The template whose nodes are `parent`'s children, and their sluice id prefix."""
    template = execution.template
    assert template is not None
    if not parent:
        return template, ""
    prefix = ""
    for part in parent.split("-"):
        node = next((n for n in template.nodes if n.id == part), None)
        reference = node.workflow_node.sub_workflow_ref.name if node is not None else ""
        if not reference or reference not in execution.sub_workflows:
            raise NotFoundError(f"node {parent!r} of {execution.record.id} has no child nodes")
        template, prefix = execution.sub_workflows[reference].template, f"{prefix}{part}-"
    return template, prefix


async def _node(
    flyte: FlyteEntityRepository,
    execution: FlyteExecution,
    node: Any,
    prefix: str,
    records: dict[str, NodeRecord],
    parent: str,
) -> FlyteNode | None:
    sluice_id = prefix + node.id
    target = node.WhichOneof("target")
    if target == "workflow_node" and node.workflow_node.HasField("sub_workflow_ref"):
        inner = [r for k, r in records.items() if k.startswith(f"{sluice_id}-")]
        sub = execution.sub_workflows.get(node.workflow_node.sub_workflow_ref.name)
        interface = sub.template.interface if sub is not None else None
        return FlyteNode(
            sluice_id, node.id, "workflow", summary(sluice_id, inner), None, interface, None, parent
        )
    record = records.get(sluice_id)
    if record is None:
        return None
    if target == "task_node":
        ident = FlyteId.of(TASK, node.task_node.reference_id)
        interface = await _task_interface(flyte, ident)
        return FlyteNode(sluice_id, node.id, "task", record, ident, interface, None, parent)
    if target == "array_node":
        ident = FlyteId.of(TASK, node.array_node.node.task_node.reference_id)
        interface = await _task_interface(flyte, ident)
        return FlyteNode(sluice_id, node.id, "array", record, ident, interface, None, parent)
    if target == "workflow_node":
        child = (record.plugin_state or {}).get("execution")
        return FlyteNode(sluice_id, node.id, "launch_plan", record, None, None, child, parent)
    return FlyteNode(sluice_id, node.id, "branch", record, None, None, None, parent)


async def _task_interface(flyte: FlyteEntityRepository, ident: FlyteId) -> Any | None:
    found = await flyte.get(*ident.key)
    return None if found is None else parse(TASK, found.spec).template.interface


def summary(node_id: str, children: list[NodeRecord]) -> NodeRecord:
    """A sub-workflow node as Flyte shows it: running while a child runs, failed if one
    failed, succeeded when all did."""
    phases = {c.phase for c in children}
    phase = NodePhase.NOT_STARTED
    if phases and phases <= {NodePhase.SUCCEEDED, NodePhase.SKIPPED}:
        phase = NodePhase.SUCCEEDED
    elif NodePhase.FAILED in phases:
        phase = NodePhase.FAILED
    elif NodePhase.ABORTED in phases:
        phase = NodePhase.ABORTED
    elif phases - {NodePhase.NOT_STARTED}:
        phase = NodePhase.RUNNING
    started = [c.started_at for c in children if c.started_at is not None]
    ended = [c.ended_at for c in children if c.ended_at is not None]
    updated = max((c.updated_at for c in children), default=0.0)
    return NodeRecord(
        "",
        node_id,
        phase=phase,
        started_at=min(started, default=None),
        ended_at=max(ended, default=None) if phase.is_terminal else None,
        updated_at=updated,
        error=next((c.error for c in children if c.error), None),
    )


def branch_children(records: list[NodeRecord], parent: str) -> list[FlyteNode]:
    """The case a branch took: sluice's `{branch}.{then node}` child."""
    return [
        FlyteNode(r.node_id, r.node_id.removeprefix(f"{parent}."), "task", r, parent=parent)
        for r in records
        if r.node_id.startswith(f"{parent}.") and r.phase is not NodePhase.NOT_STARTED
    ]
