"""Flyte's agent protocol (flyteidl.service.agent) as the `flyte_agent` plugins speak it: the
requests built from a sluice task (its flytekit template, its inputs as literals, Flyte's task
execution metadata), the agent's Resource read back as a phase and outputs, and gRPC status
codes as the web-API machinery's signals.

flyteidl and grpc are imported where used: sluice without the `flyte` extra never loads them.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from sluice.plugins.builtin.flyte_literals import literal_map, to_json
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, TaskInfo, TaskLog
from sluice.plugins.webapi.interfaces import PermanentError, ResourceVanishedError, RetryLater

THROTTLED_DELAY = 5.0
"""Seconds a create or poll waits after the agent answered RESOURCE_EXHAUSTED."""
_STATES = {
    0: "RETRYABLE_FAILURE",
    1: "PERMANENT_FAILURE",
    2: "PENDING",
    3: "RUNNING",
    4: "SUCCEEDED",
}


def template_of(ctx: TaskExecutionContext) -> Any:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    return json_format.ParseDict(ctx.task.custom["template"], tasks_pb2.TaskTemplate())


def inputs_of(ctx: TaskExecutionContext, template: Any) -> Any:
    return literal_map(dict(ctx.inputs), template.interface.inputs.variables)


def execution_metadata(ctx: TaskExecutionContext, template: Any) -> Any:
    """Flyte's TaskExecutionMetadata of this attempt: what an agent may key its job on."""
    from flyteidl.admin import agent_pb2
    from flyteidl.core import identifier_pb2

    meta = ctx.metadata
    workflow = identifier_pb2.WorkflowExecutionIdentifier(
        project=meta.project, domain=meta.domain, name=meta.execution_id
    )
    execution = identifier_pb2.TaskExecutionIdentifier(
        task_id=template.id,
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            node_id=meta.node_id, execution_id=workflow
        ),
        retry_attempt=meta.attempt,
    )
    return agent_pb2.TaskExecutionMetadata(
        task_execution_id=execution,
        namespace=f"{meta.project}-{meta.domain}",
        labels=dict(meta.labels),
        annotations=dict(meta.annotations),
        environment_variables=dict(meta.environment),
        max_attempts=meta.max_attempts,
        interruptible=meta.interruptible,
    )


def output_prefix(data_dir: str, ctx: TaskExecutionContext) -> str:
    """Where this attempt's agent may write outputs.pb and raw data."""
    return str(Path(data_dir) / "agent" / ctx.metadata.generated_name())


def encode_meta(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def decode_meta(text: str) -> bytes:
    return base64.b64decode(text)


def phase_of(resource: Any, template: Any, prefix: str, ctx: TaskExecutionContext) -> PhaseInfo:
    """The agent's Resource as a phase; on success its outputs (inline, else the outputs.pb
    it wrote under the prefix) are written as the task's."""
    from flyteidl.core import execution_pb2

    phases = execution_pb2.TaskExecution
    phase = resource.phase or _from_state(resource.state)
    message = resource.message
    info = TaskInfo(
        logs=tuple(TaskLog(name=log.name, uri=log.uri) for log in resource.log_links),
    )
    if phase == phases.SUCCEEDED:
        ctx.outputs.put(_outputs(resource, template, prefix))
        return PhaseInfo.success(info, reason=message)
    if phase == phases.FAILED:
        return PhaseInfo.permanent_failure(_code(resource), message or "the agent failed the task")
    if phase == phases.RETRYABLE_FAILED:
        return PhaseInfo.retryable_failure(_code(resource), message or "the agent failed the task")
    if phase == phases.ABORTED:
        return PhaseInfo.retryable_failure(
            "AgentAborted", message or "the agent aborted the task", ErrorKind.SYSTEM
        )
    if phase in (phases.QUEUED, phases.WAITING_FOR_RESOURCES, phases.UNDEFINED):
        return PhaseInfo.queued(0, message or "queued by the agent", info)
    if phase == phases.INITIALIZING:
        return PhaseInfo.initializing(0, message or "initializing", info)
    return PhaseInfo.running(0, message or "running on the agent", info)


def _from_state(state: int) -> int:
    """The deprecated `state` of an older agent, as a phase."""
    from flyteidl.core import execution_pb2

    phases = execution_pb2.TaskExecution
    found: int = {
        "RETRYABLE_FAILURE": phases.RETRYABLE_FAILED,
        "PERMANENT_FAILURE": phases.FAILED,
        "PENDING": phases.QUEUED,
        "RUNNING": phases.RUNNING,
        "SUCCEEDED": phases.SUCCEEDED,
    }[_STATES.get(state, "PENDING")]
    return found


def _code(resource: Any) -> str:
    return resource.agent_error.code if resource.HasField("agent_error") else "AgentFailed"


def _outputs(resource: Any, template: Any, prefix: str) -> dict[str, Any]:
    from flyteidl.core import literals_pb2

    literals = resource.outputs
    written = Path(prefix) / "outputs.pb"
    if not literals.literals and written.is_file():
        literals = literals_pb2.LiteralMap.FromString(written.read_bytes())
    declared = template.interface.outputs.variables
    missing = sorted(set(declared) - set(literals.literals))
    if missing:
        raise PermanentError("MissingOutput", f"the agent succeeded without output {missing[0]!r}")
    return {
        name: to_json(literals.literals[name], declared[name].type, f"output {name!r}")
        for name in declared
    }


def signal_of(exc: Exception, operation: str) -> Exception:
    """A gRPC error of the agent as what the web-API machinery understands: throttled ->
    RetryLater, a task the agent cannot take -> PermanentError, a job it no longer knows ->
    ResourceVanishedError (on a poll); anything else as it is (a system failure)."""
    import grpc

    if not isinstance(exc, grpc.aio.AioRpcError):
        return exc
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RetryLater(THROTTLED_DELAY, f"the agent is throttling: {details}")
    if operation == "get" and code == grpc.StatusCode.NOT_FOUND:
        return ResourceVanishedError(details)
    if code in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.FAILED_PRECONDITION,
    ):
        return PermanentError(f"Agent{code.name.title().replace('_', '')}", details)
    same: Exception = exc
    return same
