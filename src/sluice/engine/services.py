"""What the engine's parts share: config, clock, plugins, and the scheduling seam."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry

from sluice.clock import Clock
from sluice.config import EngineConfig
from sluice.engine.context import EnvSecrets
from sluice.engine.metrics import EngineMetrics
from sluice.logs import TaskLogSink
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
