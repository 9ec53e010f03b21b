"""What the engine's parts share: config, clock, plugins, and callbacks into the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry

from sluice.clock import Clock
from sluice.config import EngineConfig
from sluice.engine.context import EnvSecrets
from sluice.plugins.core.registry import PluginRegistry
from sluice.resources.models import ResourceManager


class Scheduling(Protocol):
    """The engine's side of the handler: wake-ups, admission and resource proxies."""

    def refresh(self, execution_id: str, node_id: str) -> None: ...

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None: ...

    def request_admission(self, execution_id: str, node_id: str, created_at: float) -> bool:
        """Queue the node for a slot; True if it got one at once."""
        ...

    def release_admission(self, execution_id: str, node_id: str) -> None: ...

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
