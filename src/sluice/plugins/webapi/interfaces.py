"""What a web-API plugin implements: `AsyncPlugin` (create, then poll) or `SyncPlugin` (one call).

The machinery (adapter.py, sync.py) turns either into a core sluice Plugin. A plugin reports
expected outcomes of a call by raising one of the signals below; any other exception from
`create` or `do` is a retryable failure of the task, and from `get` a failed poll (counted
toward `caching.max_system_failures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sluice.errors import SluiceError
from sluice.plugins.core.context import SecretManager, TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.webapi.config import PluginConfig
from sluice.resources.models import ResourceConstraintsSpec

ResourceMeta = dict[str, Any]
"""What identifies a remote resource (e.g. a job id). JSON: it is persisted with the task."""

Resource = Any
"""The latest view of a remote resource, as `get` returned it. Kept in memory only."""


@dataclass(frozen=True)
class GetContext:
    resource_meta: ResourceMeta
    secrets: SecretManager


@dataclass(frozen=True)
class DeleteContext:
    resource_meta: ResourceMeta
    reason: str
    secrets: SecretManager


@dataclass(frozen=True)
class StatusContext:
    """The task being driven, with its remote resource. `status` may write outputs through
    `task.outputs` but must not call the remote service."""

    task: TaskExecutionContext
    resource_meta: ResourceMeta
    resource: Resource


@runtime_checkable
class AsyncPlugin(Protocol):
    """A job on a remote service: created once, then polled in the background until done."""

    @property
    def config(self) -> PluginConfig: ...

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]:
        """The quota namespace this task draws from, and its project/namespace caps."""
        ...

    async def create(self, ctx: TaskExecutionContext) -> tuple[ResourceMeta, Resource | None]:
        """Start the remote job. Called at least once, so it should be idempotent (use
        `ctx.metadata.generated_name()` as an idempotency key). Returning the resource as
        well lets a job that finished at once end the task without a poll."""
        ...

    async def get(self, ctx: GetContext) -> Resource:
        """The job's latest state. Called from the background cache under the read limiter."""
        ...

    async def delete(self, ctx: DeleteContext) -> None:
        """Cancel the job. Called at least once; must succeed if the job is already gone."""
        ...

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        """Map the latest resource to a phase; write outputs on success. No network calls."""
        ...


@runtime_checkable
class SyncPlugin(Protocol):
    """A remote call that completes in one request."""

    @property
    def config(self) -> PluginConfig: ...

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]: ...

    async def do(self, ctx: TaskExecutionContext) -> PhaseInfo:
        """Make the call and report its outcome; called under the write limiter."""
        ...


@runtime_checkable
class Closeable(Protocol):
    async def close(self) -> None:
        """Release connections; called once when the engine stops."""
        ...


class WebApiSignal(SluiceError):
    """Raised by a plugin's call to report an expected outcome to the machinery."""


class RetryLater(WebApiSignal):
    """The service asked us to slow down (HTTP 429, or 503 with Retry-After).

    Not a failure: from `create`/`do` the task waits (WAITING_FOR_RESOURCES, no retry spent)
    and the call is made again after `delay` seconds; from `get` the poll is not counted as a
    failure. Either way the limiter for that kind of call is paused for `delay` seconds.
    """

    def __init__(self, delay: float, reason: str) -> None:
        super().__init__(reason)
        self.delay = max(0.0, delay)
        self.reason = reason


class PermanentError(WebApiSignal):
    """A failure that no retry can fix (a bad task config, HTTP 400): a permanent user failure."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ResourceVanishedError(WebApiSignal):
    """From `get`: the remote job no longer exists. A retryable system failure of the task."""
