"""What the engine's parts share: config, clock, plugins, and the seams of the task handler:
admission (wake-ups, slots, resource proxies), the cache gate and the claims gate. The gates
are always present; an engine without a catalog or a resource manager gets the no-op ones."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from sluice.clock import Clock
from sluice.config import EngineConfig
from sluice.engine.context import EnvSecrets
from sluice.engine.metrics import EngineMetrics
from sluice.engine.state import ExecutionState, NodeState
from sluice.fencing import LeaseFence
from sluice.logs import TaskLogSink
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.core.registry import PluginRegistry
from sluice.resources.models import ResourceManager


class NodeAdmission(Protocol):
    """The engine's side of the task handler: wake-ups, admission and resource proxies."""

    def refresh(self, execution_id: str, node_id: str) -> None: ...

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None: ...

    def request_admission(
        self,
        execution_id: str,
        node_id: str,
        created_at: float,
        locks: frozenset[str],
        estimate: float = 1.0,
    ) -> bool:
        """Queue the node for a slot and its locks; True if it got them at once."""
        ...

    def release_admission(self, execution_id: str, node_id: str) -> None: ...

    def admission_reason(self, execution_id: str, node_id: str, locks: frozenset[str]) -> str:
        """Why a queued node is not admitted yet, for its reason."""
        ...

    def reject(self, execution_id: str, node_id: str, busy_locks: Collection[str]) -> None: ...

    def resource_manager(
        self, plugin_id: str, execution_id: str, node_id: str
    ) -> ResourceManager: ...


class NodeCache(Protocol):
    """The cache in a node's life (cache_gate.CacheGate, or NoCache)."""

    async def before_launch(self, ex: ExecutionState, node: NodeState) -> PhaseInfo | None:
        """None to go on; SUCCESS for a hit; WAITING_FOR_CACHE while someone else computes."""
        ...

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """None when the in-flight attempt may run on; otherwise why it must stop."""
        ...

    async def heartbeat(self, ex: ExecutionState, node: NodeState) -> float | None:
        """Extend a held reservation when due; when to do so next, if it is held."""
        ...

    @property
    def renewal(self) -> tuple[float, float] | None:
        """(how often, for how long) reservations are extended; None: no reservations."""
        ...

    async def extend(self, ex: ExecutionState, node: NodeState) -> None:
        """Extend the node's reservation now if it holds one; SluiceError if the store cannot
        answer."""
        ...

    async def after_attempt(self, ex: ExecutionState, node: NodeState, succeeded: bool) -> None: ...

    async def release(self, ex: ExecutionState, node: NodeState) -> None: ...


class NodeClaims(Protocol):
    """A node's quotas and locks (claims.ClaimsGate, or NoClaims)."""

    async def acquire(
        self, ex: ExecutionState, node: NodeState
    ) -> tuple[PhaseInfo | None, str | None]:
        """(None, None) when the node holds all it claims; else why it waits or fails, and
        the lock that blocks it, if a lock does."""
        ...

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """None when the in-flight attempt still holds its claims; otherwise why it stops."""
        ...

    async def preempted_by(self, ex: ExecutionState, node: NodeState) -> str | None:
        """Why the attempt must stop for a higher-priority claim; None if it need not."""
        ...

    async def release(self, ex: ExecutionState, node: NodeState) -> None: ...

    async def renew(self, claims: Mapping[str, Any]) -> list[str]:
        """Extend every lease in `claims`; where it no longer holds."""
        ...


@dataclass
class EngineServices:
    config: EngineConfig
    clock: Clock
    registry: PluginRegistry
    secrets: EnvSecrets
    metrics: CollectorRegistry
    engine_id: str
    counters: EngineMetrics | None = None
    logs: TaskLogSink | None = None
    """Where task output goes (a writer per attempt); None discards it."""
    fence: LeaseFence = field(default_factory=LeaseFence)
    """Whether this engine may act: its leases proven alive (sluice/fencing.py)."""
    launching: bool = True
    """False while the engine drains (a SIGTERM): attempts in flight go on to their end, no
    new attempt starts."""
