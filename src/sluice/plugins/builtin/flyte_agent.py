"""The `flyte_agent` and `flyte_agent_sync` plugins: flytekit task types run by a Flyte agent
server (`pyflyte serve agent`, or any server of flyteidl's agent protocol), as Flyte's agent
plugin runs them, on sluice's web-API machinery (plugins/webapi).

- `flyte_agent` is an AsyncPlugin over AsyncAgentService: CreateTask once (the agent's
  resource meta is kept in the task's plugin state, so a restarted engine polls the job it
  created and never creates a second one), GetTask from the background cache under the read
  rate limiter, DeleteTask on abort. Quotas, rate limits and the status cache are the
  machinery's, configured under `plugins.config.flyte_agent`.
- `flyte_agent_sync` is a SyncPlugin over SyncAgentService's ExecuteTaskSync: one streamed
  call (header, then inputs) answers the outcome.

A flytekit task reaches them by its type: sluice translates a task type it has no plugin of its
own for to a task of that type, and the operator routes the type to an agent plugin with
`plugins.default_for_task_types` (`my_sensor = "flyte_agent"`), as Flyte's propeller routes
task types to its agent service. The task's `custom` carries the flytekit template; its inputs
cross as literals of the template's interface, its outputs come back from the agent's Resource
(or the outputs.pb it wrote under the attempt's output prefix, in the data directory).
"""

from __future__ import annotations

from typing import Any

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.builtin import flyte_agent_proto as proto
from sluice.plugins.core.context import SetupContext, TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.webapi import (
    DeleteContext,
    GetContext,
    PluginConfig,
    ResourceMeta,
    StatusContext,
    webapi_entry,
)
from sluice.resources.models import ResourceConstraintsSpec
from sluice.spec.models import TaskSpec

PLUGIN_ID, SYNC_PLUGIN_ID = "flyte_agent", "flyte_agent_sync"
DEFAULT_NAMESPACE = "default"
_OWN_KEYS = ("endpoint", "insecure", "timeout", "data_dir")


class AgentConnection:
    """One gRPC channel to the agent server, opened on first use (in the engine's loop)."""

    def __init__(self, endpoint: str, insecure: bool, timeout: float) -> None:
        self.endpoint, self.insecure, self.timeout = endpoint, insecure, timeout
        self._channel: Any = None

    def channel(self) -> Any:
        if self._channel is None:
            import grpc

            if self.insecure:
                self._channel = grpc.aio.insecure_channel(self.endpoint)
            else:
                credentials = grpc.ssl_channel_credentials()
                self._channel = grpc.aio.secure_channel(self.endpoint, credentials)
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


class _AgentTasks:
    """What both plugins share: the task check, the quota namespace, the connection."""

    plugin_id = PLUGIN_ID

    def __init__(
        self,
        config: PluginConfig,
        connection: AgentConnection,
        data_dir: str,
        namespaces: frozenset[str] = frozenset(),
    ) -> None:
        self.config = config
        self.connection = connection
        self.data_dir = data_dir
        self.namespaces = namespaces
        """Quota namespaces the operator configured (`resource_quotas` of the section)."""

    def validate_task(self, task: TaskSpec) -> None:
        if not self.connection.endpoint:
            raise InvalidPluginConfigError(
                f"task {task.name!r} runs on a Flyte agent, but no agent server is configured: "
                f"set plugins.config.{self.plugin_id}.endpoint (host:port)"
            )
        template = task.custom.get("template")
        if not isinstance(template, dict) or not template.get("type"):
            raise InvalidPluginConfigError(
                f"task {task.name!r}: custom.template must be a flytekit task template, "
                f"got {str(template)[:80]!r}"
            )

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]:
        """The Flyte task type's own quota when one is configured, else `default`'s."""
        task_type = str(ctx.task.custom["template"]["type"])
        return (task_type if task_type in self.namespaces else DEFAULT_NAMESPACE), None

    async def close(self) -> None:
        await self.connection.close()


class AsyncAgentPlugin(_AgentTasks):
    """AsyncAgentService: create, get, delete."""

    def _stub(self) -> Any:
        from flyteidl.service import agent_pb2_grpc

        return agent_pb2_grpc.AsyncAgentServiceStub(self.connection.channel())

    async def create(self, ctx: TaskExecutionContext) -> tuple[ResourceMeta, Any]:
        from flyteidl.admin import agent_pb2

        template = proto.template_of(ctx)
        prefix = proto.output_prefix(self.data_dir, ctx)
        request = agent_pb2.CreateTaskRequest(
            inputs=proto.inputs_of(ctx, template),
            template=template,
            output_prefix=prefix,
            task_execution_metadata=proto.execution_metadata(ctx, template),
        )
        try:
            created = await self._stub().CreateTask(request, timeout=self.connection.timeout)
        except Exception as exc:
            raise proto.signal_of(exc, "create") from exc
        meta = {
            "resource_meta": proto.encode_meta(created.resource_meta),
            "task_type": template.type,
            "task_type_version": template.task_type_version,
            "output_prefix": prefix,
        }
        return meta, None

    async def get(self, ctx: GetContext) -> Any:
        from flyteidl.admin import agent_pb2

        meta = ctx.resource_meta
        request = agent_pb2.GetTaskRequest(
            task_type=meta["task_type"],
            resource_meta=proto.decode_meta(meta["resource_meta"]),
            task_category=_category(meta),
            output_prefix=meta["output_prefix"],
        )
        try:
            found = await self._stub().GetTask(request, timeout=self.connection.timeout)
        except Exception as exc:
            raise proto.signal_of(exc, "get") from exc
        return found.resource

    async def delete(self, ctx: DeleteContext) -> None:
        import grpc
        from flyteidl.admin import agent_pb2

        meta = ctx.resource_meta
        request = agent_pb2.DeleteTaskRequest(
            task_type=meta["task_type"],
            resource_meta=proto.decode_meta(meta["resource_meta"]),
            task_category=_category(meta),
        )
        try:
            await self._stub().DeleteTask(request, timeout=self.connection.timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:  # gone already: deleted
                raise proto.signal_of(exc, "delete") from exc

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        template = proto.template_of(ctx.task)
        prefix = ctx.resource_meta["output_prefix"]
        return proto.phase_of(ctx.resource, template, prefix, ctx.task)


class SyncAgentPlugin(_AgentTasks):
    """SyncAgentService: ExecuteTaskSync, one streamed call (header, then inputs)."""

    plugin_id = SYNC_PLUGIN_ID

    async def do(self, ctx: TaskExecutionContext) -> PhaseInfo:
        from flyteidl.admin import agent_pb2
        from flyteidl.service import agent_pb2_grpc

        template = proto.template_of(ctx)
        prefix = proto.output_prefix(self.data_dir, ctx)
        header = agent_pb2.CreateRequestHeader(
            template=template,
            output_prefix=prefix,
            task_execution_metadata=proto.execution_metadata(ctx, template),
        )
        requests = [
            agent_pb2.ExecuteTaskSyncRequest(header=header),
            agent_pb2.ExecuteTaskSyncRequest(inputs=proto.inputs_of(ctx, template)),
        ]
        stub = agent_pb2_grpc.SyncAgentServiceStub(self.connection.channel())
        resource = None
        try:
            call = stub.ExecuteTaskSync(iter(requests), timeout=self.connection.timeout)
            async for answer in call:
                if answer.HasField("header"):
                    resource = answer.header.resource
        except Exception as exc:
            raise proto.signal_of(exc, "do") from exc
        if resource is None:
            return PhaseInfo.system_retryable_failure("AgentNoAnswer", "the agent answered nothing")
        return proto.phase_of(resource, template, prefix, ctx)


def _category(meta: ResourceMeta) -> Any:
    from flyteidl.admin import agent_pb2

    return agent_pb2.TaskCategory(name=meta["task_type"], version=meta["task_type_version"])


def _settings(setup: SetupContext) -> tuple[AgentConnection, str, frozenset[str]]:
    """The agent server (none configured: the plugin loads, its tasks are refused at launch)."""
    config = setup.config
    endpoint = config.get("endpoint", "")
    if not isinstance(endpoint, str):
        raise InvalidPluginConfigError(
            f"endpoint must be the agent server's host:port, got {endpoint!r}"
        )
    timeout = config.get("timeout", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidPluginConfigError(f"timeout must be a number > 0, got {timeout!r}")
    insecure = config.get("insecure", True)
    if not isinstance(insecure, bool):
        raise InvalidPluginConfigError(f"insecure must be true or false, got {insecure!r}")
    data_dir = str(config.get("data_dir") or ".sluice/flyte")
    quotas = config.get("resource_quotas") or {}
    namespaces = frozenset(quotas) if isinstance(quotas, dict) else frozenset()
    return AgentConnection(endpoint, insecure, float(timeout)), data_dir, namespaces


def _load(setup: SetupContext) -> AsyncAgentPlugin:
    return AsyncAgentPlugin(_defaults(), *_settings(setup))


def _load_sync(setup: SetupContext) -> SyncAgentPlugin:
    return SyncAgentPlugin(_defaults(), *_settings(setup))


def _defaults() -> PluginConfig:
    """Flyte's agent plugin defaults; `plugins.config.<id>` overrides any of them."""
    return PluginConfig(resource_quotas={DEFAULT_NAMESPACE: 1000})


ENTRY = webapi_entry(PLUGIN_ID, (PLUGIN_ID,), _load, plugin_config_keys=_OWN_KEYS)
SYNC_ENTRY = webapi_entry(
    SYNC_PLUGIN_ID, (SYNC_PLUGIN_ID,), _load_sync, plugin_config_keys=_OWN_KEYS
)
