"""Store records and subsystem snapshots as the service's views."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sluice.plugins.core.phase import Phase
from sluice.resources.models import NamespaceSnapshot
from sluice.service import models as m
from sluice.service.attempts import attempts as attempt_views
from sluice.spec.compound import ShownNode
from sluice.spec.models import NodeSpec, WorkflowSpec
from sluice.spec.phases import NodePhase
from sluice.spec.validate import dependencies
from sluice.store.records import EventRecord, ExecutionRecord, LaunchPlanRecord, NodeRecord


def _utc(timestamp: float) -> Any:
    return m.utc(timestamp)


def duration(record: ExecutionRecord, now: float) -> float | None:
    if record.started_at is None:
        return None
    return round((record.ended_at or now) - record.started_at, 3)


def execution_summary(
    record: ExecutionRecord, now: float, position: int | None = None
) -> m.ExecutionSummary:
    return m.ExecutionSummary(**_summary_fields(record, now, position))


def _summary_fields(record: ExecutionRecord, now: float, position: int | None) -> dict[str, Any]:
    return {
        "id": record.id,
        "project": record.project,
        "domain": record.domain,
        "workflow": record.workflow_key,
        "launch_plan": record.launch_plan,
        "launch_plan_version": record.launch_plan_version,
        "phase": record.phase.value,
        "reason": record.reason,
        "priority": record.priority,
        "created_at": _utc(record.created_at),
        "started_at": m.utc(record.started_at),
        "ended_at": m.utc(record.ended_at),
        "duration": duration(record, now),
        "position": position,
        "owner": record.owner,
        "concurrency_key": record.concurrency_key,
        "backfill_id": record.backfill_id,
        "scheduled_at": m.utc(record.scheduled_at),
    }


def execution(
    record: ExecutionRecord,
    nodes: Iterable[m.NodeExecution],
    events: Iterable[EventRecord],
    now: float,
    position: int | None = None,
) -> m.Execution:
    return m.Execution(
        **_summary_fields(record, now, position),
        inputs=record.inputs,
        outputs=record.outputs,
        error=record.error,
        nodes=list(nodes),
        events=[event(e) for e in events],
        relaunch_of=record.options.get("relaunch_of"),
        retry_of=record.options.get("retry_of"),
    )


def node_phase_label(node: NodeRecord) -> str:
    """What a node is doing now: its plugin's phase while RUNNING, else the node's phase."""
    if node.phase is NodePhase.RUNNING:
        return Phase(node.task_phase).name if node.task_phase else "STARTING"
    return node.phase.value


def node_execution(
    node: NodeRecord,
    workflow: WorkflowSpec | None,
    spec: NodeSpec | None,
    events: Iterable[EventRecord],
    log_bytes: Mapping[int, int] | None = None,
    *,
    child: ShownNode | None = None,
) -> m.NodeExecution:
    """A node's view; `child` for a node a compound node created at run time."""
    task = workflow.tasks.get(spec.task) if workflow and spec else None
    depends_on = sorted(dependencies(spec)) if spec else []
    if child is not None:
        task, depends_on = child.task, list(child.depends_on)
    return m.NodeExecution(
        node=node.node_id,
        task=task.name if task else "",
        parent=child.parent if child else None,
        phase=node.phase.value,
        task_phase=node_phase_label(node),
        attempt=node.attempt + 1,
        reason=node.reason,
        cache_status=node.cache_status.value,
        reservation_status=node.reservation_status.value,
        depends_on=depends_on,
        inputs=node.inputs,
        outputs=node.outputs,
        error=node.error,
        locks=list((node.claims or {}).get("locks", [])),
        started_at=m.utc(node.started_at),
        ended_at=m.utc(node.ended_at),
        updated_at=m.utc(node.updated_at) if node.updated_at else None,
        attempts=attempt_views(node, events, log_bytes or {}),
    )


def event(record: EventRecord) -> m.Event:
    return m.Event(
        id=record.id,
        execution_id=record.execution_id,
        node_id=record.node_id,
        attempt=record.attempt + 1 if record.node_id else 0,
        phase=record.phase,
        phase_version=record.phase_version,
        reason=record.reason,
        occurred_at=_utc(record.occurred_at),
        info=record.info,
    )


def launch_plan(
    record: LaunchPlanRecord, spec: dict[str, Any], next_firings: Iterable[float] = ()
) -> m.LaunchPlan:
    return m.LaunchPlan(
        project=record.project,
        domain=record.domain,
        name=record.name,
        version=record.version,
        state=record.state,
        workflow=record.workflow,
        concurrency=spec["concurrency"],
        schedule=spec["schedule"],
        priority=spec["priority"],
        default_inputs=spec["default_inputs"],
        fixed_inputs=spec["fixed_inputs"],
        created_at=_utc(record.created_at),
        updated_at=_utc(record.updated_at),
        next_firings=[_utc(t) for t in next_firings],
    )


def quota(snapshot: NamespaceSnapshot) -> m.Quota:
    return m.Quota(
        namespace=snapshot.namespace,
        quota=snapshot.quota,
        quota_source=snapshot.quota_source,
        in_use=snapshot.in_use,
        holders=[
            m.Holder(
                token=h.token,
                project=h.project,
                domain=h.domain,
                execution_id=h.execution_id,
                node_id=h.node_id,
                units=h.units,
                since=_utc(h.since),
                lease_expires_at=_utc(h.lease_expires_at),
            )
            for h in snapshot.holders
        ],
        waiters=[
            m.Waiter(
                position=w.position,
                token=w.token,
                project=w.project,
                domain=w.domain,
                execution_id=w.execution_id,
                node_id=w.node_id,
                units=w.units,
                priority=w.priority,
                since=_utc(w.since),
                blocking_scope=w.blocking_scope,
                held_back_by=m.held_back_by(w.blocking_scope, snapshot.in_use, snapshot.quota),
            )
            for w in snapshot.waiters
        ],
        quotas=[(str(source), value) for source, value in snapshot.quotas],
    )
