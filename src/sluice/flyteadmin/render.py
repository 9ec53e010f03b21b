"""sluice's views as flyteidl protobufs: identifiers, phases, times, executions and nodes, the
closures of registered entities, and JSON values as literals of a Flyte interface."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    launch_plan_pb2,
    node_execution_pb2,
    task_pb2,
    workflow_pb2,
)
from flyteidl.core import compiler_pb2, identifier_pb2, interface_pb2, literals_pb2
from flyteidl.core import execution_pb2 as core_execution
from google.protobuf import duration_pb2, timestamp_pb2

from sluice.plugins.builtin.flyte_literals import to_literal
from sluice.service.flyte import FlyteId
from sluice.service.flyte.views import FlyteExecution, FlyteNode
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.flyte_entities import ACTIVE, LAUNCH_PLAN, TASK, WORKFLOW, FlyteEntityRecord
from sluice.store.records import NodeRecord

_LOG = logging.getLogger("sluice.flyteadmin")
RESOURCE_TYPES = {
    TASK: identifier_pb2.TASK,
    WORKFLOW: identifier_pb2.WORKFLOW,
    LAUNCH_PLAN: identifier_pb2.LAUNCH_PLAN,
}
_WORKFLOW_PHASES = {
    ExecutionPhase.PENDING: core_execution.WorkflowExecution.QUEUED,
    ExecutionPhase.QUEUED: core_execution.WorkflowExecution.QUEUED,
    ExecutionPhase.RUNNING: core_execution.WorkflowExecution.RUNNING,
    ExecutionPhase.SUCCEEDING: core_execution.WorkflowExecution.SUCCEEDING,
    ExecutionPhase.SUCCEEDED: core_execution.WorkflowExecution.SUCCEEDED,
    ExecutionPhase.FAILING: core_execution.WorkflowExecution.FAILING,
    ExecutionPhase.FAILED: core_execution.WorkflowExecution.FAILED,
    ExecutionPhase.ABORTING: core_execution.WorkflowExecution.ABORTING,
    ExecutionPhase.ABORTED: core_execution.WorkflowExecution.ABORTED,
    ExecutionPhase.TIMED_OUT: core_execution.WorkflowExecution.TIMED_OUT,
    # Flyte has no skipped execution: one a SKIP policy refused never ran, it is aborted
    ExecutionPhase.SKIPPED: core_execution.WorkflowExecution.ABORTED,
}
_NODE_PHASES = {
    NodePhase.NOT_STARTED: core_execution.NodeExecution.UNDEFINED,
    NodePhase.RUNNING: core_execution.NodeExecution.RUNNING,
    NodePhase.SUCCEEDED: core_execution.NodeExecution.SUCCEEDED,
    NodePhase.FAILED: core_execution.NodeExecution.FAILED,
    NodePhase.ABORTED: core_execution.NodeExecution.ABORTED,
    NodePhase.SKIPPED: core_execution.NodeExecution.SKIPPED,
}


def identifier(ident: FlyteId) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=RESOURCE_TYPES[ident.kind],
        project=ident.project,
        domain=ident.domain,
        name=ident.name,
        version=ident.version,
    )


def record_id(record: FlyteEntityRecord) -> identifier_pb2.Identifier:
    return identifier(
        FlyteId(record.resource_type, record.project, record.domain, record.name, record.version)
    )


def timestamp(seconds: float | None) -> timestamp_pb2.Timestamp | None:
    if seconds is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def duration(start: float | None, end: float | None) -> duration_pb2.Duration | None:
    if start is None or end is None:
        return None
    span = duration_pb2.Duration()
    span.FromNanoseconds(int(max(0.0, end - start) * 1e9))
    return span


def literals(values: Mapping[str, Any] | None, variables: Any) -> literals_pb2.LiteralMap:
    """JSON values as a LiteralMap typed by `variables` (a VariableMap's); a value that does
    not convert is left out (logged), so one odd value never hides the others."""
    found = literals_pb2.LiteralMap()
    for name, value in (values or {}).items():
        if variables is None or name not in variables:
            continue
        try:
            found.literals[name].CopyFrom(to_literal(value, variables[name].type, name))
        except Exception as exc:  # a value sluice stored that the Flyte type does not fit
            _LOG.warning("value %r does not convert to its Flyte type: %s", name, exc)
    return found


def error(stored: Mapping[str, Any] | None) -> core_execution.ExecutionError | None:
    if not stored:
        return None
    kind = stored.get("kind", "USER")
    message = str(stored.get("message", ""))
    if stored.get("node"):
        message = f"node {stored['node']}: {message}"
    return core_execution.ExecutionError(
        code=str(stored.get("code", "Unknown")),
        message=message,
        kind=core_execution.ExecutionError.SYSTEM
        if kind == "SYSTEM"
        else core_execution.ExecutionError.USER,
    )


def execution_id(project: str, domain: str, name: str) -> Any:
    return identifier_pb2.WorkflowExecutionIdentifier(project=project, domain=domain, name=name)


def execution(view: FlyteExecution) -> execution_pb2.Execution:
    record = view.record
    closure = execution_pb2.ExecutionClosure(
        phase=_WORKFLOW_PHASES[record.phase],
        created_at=timestamp(record.created_at),
        updated_at=timestamp(record.updated_at),
        started_at=timestamp(record.started_at),
        duration=duration(record.started_at, record.ended_at),
    )
    if view.workflow is not None:
        closure.workflow_id.CopyFrom(identifier(view.workflow))
    if record.phase in (ExecutionPhase.ABORTED, ExecutionPhase.SKIPPED):
        closure.abort_metadata.CopyFrom(execution_pb2.AbortMetadata(cause=record.reason))
    elif (found := error(record.error)) is not None:
        closure.error.CopyFrom(found)
    spec = execution_pb2.ExecutionSpec(
        metadata=execution_pb2.ExecutionMetadata(
            mode=execution_pb2.ExecutionMetadata.SCHEDULED
            if record.scheduled_at is not None
            else execution_pb2.ExecutionMetadata.MANUAL,
            scheduled_at=timestamp(record.scheduled_at),
            principal="sluice",
        ),
        overwrite_cache=bool(record.options.get("overwrite_cache")),
    )
    if view.target is not None:
        spec.launch_plan.CopyFrom(identifier(view.target))
    return execution_pb2.Execution(
        id=execution_id(record.project, record.domain, record.id), spec=spec, closure=closure
    )


def execution_data(view: FlyteExecution) -> execution_pb2.WorkflowExecutionGetDataResponse:
    interface = view.interface
    inputs = literals(view.record.inputs, interface.inputs.variables if interface else None)
    outputs = literals(view.record.outputs, interface.outputs.variables if interface else None)
    return execution_pb2.WorkflowExecutionGetDataResponse(full_inputs=inputs, full_outputs=outputs)


def node_phase(record: NodeRecord) -> int:
    return int(_NODE_PHASES[record.phase])


def node_execution(view: FlyteExecution, node: FlyteNode) -> node_execution_pb2.NodeExecution:
    record = node.record
    closure = node_execution_pb2.NodeExecutionClosure(
        phase=node_phase(record),
        started_at=timestamp(record.started_at),
        duration=duration(record.started_at, record.ended_at),
        created_at=timestamp(record.started_at or record.updated_at),
        updated_at=timestamp(record.updated_at),
    )
    if (found := error(record.error)) is not None:
        closure.error.CopyFrom(found)
    if node.child_execution:
        child = execution_id(view.record.project, view.record.domain, node.child_execution)
        closure.workflow_node_metadata.executionId.CopyFrom(child)
    metadata = node_execution_pb2.NodeExecutionMetaData(
        spec_node_id=node.spec_node_id,
        is_parent_node=node.is_parent,
        is_array=node.kind == "array",
    )
    return node_execution_pb2.NodeExecution(
        id=identifier_pb2.NodeExecutionIdentifier(
            node_id=node.node_id,
            execution_id=execution_id(view.record.project, view.record.domain, view.record.id),
        ),
        closure=closure,
        metadata=metadata,
    )


def node_data(node: FlyteNode) -> node_execution_pb2.NodeExecutionGetDataResponse:
    interface = node.interface
    record = node.record
    return node_execution_pb2.NodeExecutionGetDataResponse(
        full_inputs=literals(record.inputs, interface.inputs.variables if interface else None),
        full_outputs=literals(record.outputs, interface.outputs.variables if interface else None),
    )


def task(record: FlyteEntityRecord, spec: Any) -> task_pb2.Task:
    closure = task_pb2.TaskClosure(
        compiled_task=compiler_pb2.CompiledTask(template=spec.template),
        created_at=timestamp(record.created_at),
    )
    return task_pb2.Task(id=record_id(record), closure=closure, short_description="")


def workflow(record: FlyteEntityRecord, spec: Any, tasks: list[Any]) -> workflow_pb2.Workflow:
    compiled = compiler_pb2.CompiledWorkflowClosure(
        primary=compiler_pb2.CompiledWorkflow(template=spec.template),
        sub_workflows=[compiler_pb2.CompiledWorkflow(template=w) for w in spec.sub_workflows],
        tasks=[compiler_pb2.CompiledTask(template=t.template) for t in tasks],
    )
    closure = workflow_pb2.WorkflowClosure(
        compiled_workflow=compiled, created_at=timestamp(record.created_at)
    )
    return workflow_pb2.Workflow(id=record_id(record), closure=closure)


def launch_plan(
    record: FlyteEntityRecord, spec: Any, outputs: Any | None
) -> launch_plan_pb2.LaunchPlan:
    closure = launch_plan_pb2.LaunchPlanClosure(
        state=launch_plan_pb2.ACTIVE if record.state == ACTIVE else launch_plan_pb2.INACTIVE,
        expected_inputs=spec.default_inputs,
        expected_outputs=outputs if outputs is not None else interface_pb2.VariableMap(),
        created_at=timestamp(record.created_at),
        updated_at=timestamp(record.updated_at),
    )
    return launch_plan_pb2.LaunchPlan(id=record_id(record), spec=spec, closure=closure)


def named_ids(kind: str, project: str, domain: str, names: list[str], token: str) -> Any:
    entities = [
        common_pb2.NamedEntityIdentifier(project=project, domain=domain, name=name)
        for name in names
    ]
    return common_pb2.NamedEntityIdentifierList(entities=entities, token=token)
