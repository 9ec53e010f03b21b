"""The narrow views a plugin gets of the engine: at load (SetupContext) and per task
execution (TaskExecutionContext). The engine implements these; plugins never import it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from prometheus_client import CollectorRegistry

from sluice.clock import Clock
from sluice.fencing import LeaseFence
from sluice.ids import fit_name
from sluice.resources.models import ResourceManager, ResourceRegistrar
from sluice.resources.ratelimit.models import RateLimitRegistrar
from sluice.spec.models import TaskSpec


class SecretManager(Protocol):
    def get(self, name: str) -> str:
        """The secret's value; raises NotFoundError naming the secret if it is not set."""
        ...


@dataclass(frozen=True)
class TaskExecutionMetadata:
    """Who is running: ids, attempt, labels. `generated_name` is stable for an attempt."""

    execution_id: str
    project: str
    domain: str
    node_id: str
    attempt: int
    task_name: str
    max_attempts: int = 1
    interruptible: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)
    engine_id: str = ""
    fencing_token: str = ""
    """`<execution>/<node>@<ownership epoch>`: increases with every takeover of the execution,
    for external systems that refuse writes from an older holder (docs/invariants.md)."""

    @property
    def unique_node_id(self) -> str:
        return f"{self.execution_id}-{self.node_id}"

    def generated_name(self, min_length: int = 0, max_length: int = 63) -> str:
        """A name for external resources, unique per attempt, fitted to the given lengths."""
        base = f"{self.execution_id}-{self.node_id}-{self.attempt}".lower()
        safe = "".join(c if c.isalnum() or c == "-" else "-" for c in base)
        return fit_name(safe, min_length, max_length)


class PluginStateReader(Protocol):
    @property
    def state_version(self) -> int:
        """The version the last `put` wrote, 0 if nothing was written."""
        ...

    def get(self) -> dict[str, Any] | None:
        """The state the plugin last wrote for this attempt, or None."""
        ...


class PluginStateWriter(Protocol):
    def put(self, version: int, state: dict[str, Any]) -> None:
        """Replace the plugin state; persisted with the transition, visible on the next call."""
        ...

    def reset(self) -> None:
        """Forget the plugin state."""
        ...


LogStream = Literal["stdout", "stderr"]


class TaskLogWriter(Protocol):
    """Where a plugin writes what its task printed or reported, for this attempt's log (stored
    by the engine with a timestamp and the stream; read by `sluice logs`, the API and the UI).
    The writer outlives the call that handed it out, so work that goes on in the background
    (a pool job, a remote job's log stream) keeps writing to it until the attempt ends."""

    def write(self, text: str, stream: LogStream = "stdout", at: float | None = None) -> None:
        """Append `text` (one or more lines) on `stream`; `at` is when it was produced (clock
        seconds, default now). Never blocks and never raises: past the log's size limit, text
        is dropped and counted."""
        ...


class OutputWriter(Protocol):
    def put(self, outputs: Mapping[str, Any]) -> None:
        """Record the task's outputs as JSON values; checked against the interface."""
        ...


class TaskExecutionContext(Protocol):
    """Everything a plugin may use while driving one task attempt."""

    @property
    def metadata(self) -> TaskExecutionMetadata: ...

    @property
    def task(self) -> TaskSpec: ...

    @property
    def inputs(self) -> Mapping[str, Any]:
        """The task's inputs as JSON values, bound and validated."""
        ...

    @property
    def outputs(self) -> OutputWriter: ...

    @property
    def state_reader(self) -> PluginStateReader: ...

    @property
    def state_writer(self) -> PluginStateWriter: ...

    @property
    def resource_manager(self) -> ResourceManager: ...

    @property
    def log_writer(self) -> TaskLogWriter:
        """This attempt's log: what the task prints and what the plugin has to say about it."""
        ...

    @property
    def secrets(self) -> SecretManager: ...

    @property
    def clock(self) -> Clock: ...

    def refresh(self) -> None:
        """Ask the engine to evaluate this task again now (a background job finished)."""
        ...


@dataclass
class SetupContext:
    """What a plugin gets when it is loaded."""

    plugin_id: str
    registrar: ResourceRegistrar
    metrics: CollectorRegistry
    secrets: SecretManager
    config: Mapping[str, Any]
    clock: Clock
    kube_client: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    fence: LeaseFence | None = None
    """The engine's lease fence: a plugin running bodies in local processes hands them its
    shared file so they end when the engine cannot show its leases (sluice/fencing.py)."""
    rate_limits: RateLimitRegistrar | None = None
    """Rate limits shared by every engine (`<plugin id>/<name>`); None: keep them in memory."""
