"""AdminService RPCs on executions, their nodes and task attempts: create, get, list,
terminate, and their inputs and outputs (inline, as literals of the Flyte interface)."""

from __future__ import annotations

from typing import Any

from flyteidl.admin import execution_pb2, node_execution_pb2, task_execution_pb2
from flyteidl.core import execution_pb2 as core_execution
from flyteidl.core import identifier_pb2

from sluice.errors import InvalidArgumentError
from sluice.flyteadmin import render
from sluice.flyteadmin.calls import Caller, rpc
from sluice.service import Sluice
from sluice.service.flyte import FlyteId
from sluice.service.flyte.graph import KINDS
from sluice.service.flyte.views import FlyteExecution, FlyteNode
from sluice.spec.phases import NodePhase

_TASK_PHASES = {
    NodePhase.NOT_STARTED: core_execution.TaskExecution.UNDEFINED,
    NodePhase.RUNNING: core_execution.TaskExecution.RUNNING,
    NodePhase.SUCCEEDED: core_execution.TaskExecution.SUCCEEDED,
    NodePhase.FAILED: core_execution.TaskExecution.FAILED,
    NodePhase.ABORTED: core_execution.TaskExecution.ABORTED,
    NodePhase.SKIPPED: core_execution.TaskExecution.ABORTED,
}


class ExecutionRpcs:
    caller: Caller
    http_url: str

    @rpc
    async def CreateExecution(self, request: Any, service: Sluice) -> Any:
        launched = request.spec.launch_plan
        kind = KINDS.get(launched.resource_type)
        if kind is None:
            raise InvalidArgumentError(
                f"spec.launch_plan must name a launch plan or a task, not resource type "
                f"{launched.resource_type}"
            )
        inputs = request.inputs if request.inputs.literals else request.spec.inputs
        found = await service.flyte.create_execution(
            request.project,
            request.domain,
            request.name,
            FlyteId.of(kind, launched),
            inputs,
            overwrite_cache=request.spec.overwrite_cache,
        )
        record = found.record
        identifier = render.execution_id(record.project, record.domain, record.id)
        return execution_pb2.ExecutionCreateResponse(id=identifier)

    @rpc
    async def GetExecution(self, request: Any, service: Sluice) -> Any:
        return render.execution(await _execution(service, request.id))

    @rpc
    async def GetExecutionData(self, request: Any, service: Sluice) -> Any:
        return render.execution_data(await _execution(service, request.id))

    @rpc
    async def ListExecutions(self, request: Any, service: Sluice) -> Any:
        named = request.id
        limit = request.limit or 100
        found, cursor = await service.flyte.executions(
            named.project, named.domain, limit=limit, cursor=request.token or None
        )
        return execution_pb2.ExecutionList(
            executions=[render.execution(e) for e in found], token=cursor or ""
        )

    @rpc
    async def TerminateExecution(self, request: Any, service: Sluice) -> Any:
        ident = request.id
        await service.flyte.terminate(ident.project, ident.domain, ident.name, request.cause)
        return execution_pb2.ExecutionTerminateResponse()

    @rpc
    async def ListNodeExecutions(self, request: Any, service: Sluice) -> Any:
        ident = request.workflow_execution_id
        execution = await _execution(service, ident)
        nodes = await service.flyte.nodes(
            ident.project, ident.domain, ident.name, request.unique_parent_id
        )
        return node_execution_pb2.NodeExecutionList(
            node_executions=[render.node_execution(execution, n) for n in nodes]
        )

    @rpc
    async def GetNodeExecution(self, request: Any, service: Sluice) -> Any:
        execution, node = await _node(service, request.id)
        return render.node_execution(execution, node)

    @rpc
    async def GetNodeExecutionData(self, request: Any, service: Sluice) -> Any:
        _, node = await _node(service, request.id)
        return render.node_data(node)

    @rpc
    async def ListTaskExecutions(self, request: Any, service: Sluice) -> Any:
        execution, node = await _node(service, request.node_execution_id)
        found = [self._attempt(execution, node)] if node.task is not None else []
        return task_execution_pb2.TaskExecutionList(task_executions=found)

    @rpc
    async def GetTaskExecution(self, request: Any, service: Sluice) -> Any:
        execution, node = await _node(service, request.id.node_execution_id)
        return self._attempt(execution, node)

    @rpc
    async def GetTaskExecutionData(self, request: Any, service: Sluice) -> Any:
        _, node = await _node(service, request.id.node_execution_id)
        data = render.node_data(node)
        return task_execution_pb2.TaskExecutionGetDataResponse(
            full_inputs=data.full_inputs, full_outputs=data.full_outputs
        )

    def _attempt(self, execution: FlyteExecution, node: FlyteNode) -> Any:
        """The node's latest attempt as a Flyte task execution, its log in sluice's API."""
        record = node.record
        assert node.task is not None
        node_id = identifier_pb2.NodeExecutionIdentifier(
            node_id=node.node_id,
            execution_id=render.execution_id(
                execution.record.project, execution.record.domain, execution.record.id
            ),
        )
        logs = f"{self.http_url}/api/v1/executions/{execution.record.id}/nodes/{node.node_id}/logs"
        closure = task_execution_pb2.TaskExecutionClosure(
            phase=_TASK_PHASES[record.phase],
            logs=[core_execution.TaskLog(uri=logs, name="sluice logs")] if self.http_url else [],
            started_at=render.timestamp(record.attempt_started_at or record.started_at),
            duration=render.duration(record.attempt_started_at, record.ended_at),
            created_at=render.timestamp(record.started_at or record.updated_at),
            updated_at=render.timestamp(record.updated_at),
            reason=record.reason,
        )
        if (error := render.error(record.error)) is not None:
            closure.error.CopyFrom(error)
        ident = identifier_pb2.TaskExecutionIdentifier(
            task_id=render.identifier(node.task),
            node_execution_id=node_id,
            retry_attempt=record.attempt,
        )
        return task_execution_pb2.TaskExecution(id=ident, closure=closure)


async def _execution(service: Sluice, ident: Any) -> FlyteExecution:
    return await service.flyte.execution(ident.project, ident.domain, ident.name)


async def _node(service: Sluice, ident: Any) -> tuple[FlyteExecution, FlyteNode]:
    workflow = ident.execution_id
    execution = await _execution(service, workflow)
    node = await service.flyte.node(workflow.project, workflow.domain, workflow.name, ident.node_id)
    return execution, node
