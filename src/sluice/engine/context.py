"""The engine's TaskExecutionContext: what a plugin sees of one task attempt."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sluice.clock import Clock
from sluice.errors import NotFoundError
from sluice.plugins.core.context import TaskExecutionMetadata, TaskLogWriter
from sluice.resources.models import ResourceManager
from sluice.spec.models import TaskSpec


class EnvSecrets:
    """Secrets from `SLUICE_SECRET_<NAME>` environment variables or files in a directory."""

    def __init__(self, directory: str | None = None) -> None:
        self._directory = Path(directory) if directory else None

    def get(self, name: str) -> str:
        value = os.environ.get("SLUICE_SECRET_" + name.upper().replace("-", "_"))
        if value is not None:
            return value
        if self._directory is not None and (self._directory / name).is_file():
            return (self._directory / name).read_text().strip()
        raise NotFoundError(f"secret {name!r} is not set (SLUICE_SECRET_{name.upper()})")


class PendingState:
    """Plugin state: reads see the last persisted value; a put is kept until the engine
    persists it with the transition."""

    def __init__(self, version: int, value: dict[str, Any] | None) -> None:
        self._version = version
        self._value = value
        self.written = False

    @property
    def state_version(self) -> int:
        return self._version

    def get(self) -> dict[str, Any] | None:
        return copy.deepcopy(self._value)

    def put(self, version: int, state: dict[str, Any]) -> None:
        self._version, self._value, self.written = version, copy.deepcopy(state), True

    def reset(self) -> None:
        self._version, self._value, self.written = 0, None, True

    @property
    def value(self) -> dict[str, Any] | None:
        return self._value


class DiscardingLog:
    """A TaskLogWriter that keeps nothing (an engine without a log store, and tests)."""

    def write(self, text: str, stream: str = "stdout", at: float | None = None) -> None:
        return None


class PendingOutputs:
    def __init__(self) -> None:
        self.values: dict[str, Any] | None = None

    def put(self, outputs: Mapping[str, Any]) -> None:
        self.values = dict(outputs)


class NodeContext:
    """A TaskExecutionContext for the calls of a plugin on one node attempt (kept by the
    engine for the attempt: engine/invoker.py)."""

    def __init__(
        self,
        *,
        metadata: TaskExecutionMetadata,
        task: TaskSpec,
        inputs: Mapping[str, Any],
        state: PendingState,
        resource_manager: Callable[[], ResourceManager],
        secrets: EnvSecrets,
        clock: Clock,
        refresh: Callable[[], None],
        log_writer: TaskLogWriter | None = None,
        plugin_id: str = "",
    ) -> None:
        self.metadata = metadata
        self.plugin_id = plugin_id
        self.task = task
        self.inputs = inputs
        self.outputs = PendingOutputs()
        self.state = state
        self._resource_manager = resource_manager
        self._resources: ResourceManager | None = None
        self.secrets = secrets
        self.clock = clock
        self._refresh = refresh
        self.log_writer: TaskLogWriter = log_writer or DiscardingLog()

    @property
    def resource_manager(self) -> ResourceManager:
        """Made when a plugin first asks for it: most calls (a python task's) never do, and
        making one checks the namespace and holder (tens of microseconds)."""
        if self._resources is None:
            self._resources = self._resource_manager()
        return self._resources

    @property
    def state_reader(self) -> PendingState:
        return self.state

    @property
    def state_writer(self) -> PendingState:
        return self.state

    def refresh(self) -> None:
        self._refresh()
