"""Drive a plugin without an engine: an in-memory TaskExecutionContext and a loop that calls
`handle` until the task is terminal. For plugin authors' tests and sluice's own."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from sluice.cancellation import wait_event
from sluice.clock import Clock, SystemClock
from sluice.errors import NotFoundError
from sluice.plugins.core.context import SetupContext, TaskExecutionMetadata
from sluice.plugins.core.phase import PhaseInfo, Transition
from sluice.plugins.core.plugin import Plugin
from sluice.resources.models import NoopResourceManager, ResourceManager
from sluice.spec.models import TaskSpec


class DictSecrets:
    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values = dict(values or {})

    def get(self, name: str) -> str:
        try:
            return self._values[name]
        except KeyError:
            raise NotFoundError(f"secret {name!r} is not set") from None


class RecordingRegistrar:
    """Collects the quotas a plugin registers at load."""

    def __init__(self) -> None:
        self.quotas: dict[str, int] = {}

    def register_resource_quota(self, namespace: str, quota: int) -> None:
        self.quotas[namespace] = quota


class _State:
    def __init__(self) -> None:
        self.version = 0
        self.value: dict[str, Any] | None = None

    @property
    def state_version(self) -> int:
        return self.version

    def get(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.value)

    def put(self, version: int, state: dict[str, Any]) -> None:
        self.version, self.value = version, copy.deepcopy(state)

    def reset(self) -> None:
        self.version, self.value = 0, None


class _Outputs:
    def __init__(self) -> None:
        self.values: dict[str, Any] | None = None

    def put(self, outputs: Mapping[str, Any]) -> None:
        self.values = dict(outputs)


@dataclass
class MemoryLog:
    """A TaskLogWriter that keeps (stream, text) pairs in memory, for assertions."""

    lines: list[tuple[str, str]] = field(default_factory=list)

    def write(self, text: str, stream: str = "stdout", at: float | None = None) -> None:
        self.lines.extend((stream, line) for line in text.splitlines())

    def text(self, stream: str | None = None) -> str:
        return "\n".join(t for s, t in self.lines if stream is None or s == stream)


@dataclass
class FakeTaskContext:
    """A TaskExecutionContext held in memory. Plugin state persists between `handle` calls
    exactly as the engine would persist it; `refreshes` counts `refresh()` calls."""

    task: TaskSpec
    inputs: Mapping[str, Any] = field(default_factory=dict)
    metadata: TaskExecutionMetadata = field(
        default_factory=lambda: TaskExecutionMetadata(
            execution_id="xtest", project="p", domain="d", node_id="n0", attempt=0, task_name="t"
        )
    )
    resource_manager: ResourceManager = field(default_factory=NoopResourceManager)
    secrets: DictSecrets = field(default_factory=DictSecrets)
    clock: Clock = field(default_factory=SystemClock)
    log_writer: MemoryLog = field(default_factory=MemoryLog)
    refreshes: int = 0
    refreshed: asyncio.Event = field(default_factory=asyncio.Event)
    _state: _State = field(default_factory=_State)
    _outputs: _Outputs = field(default_factory=_Outputs)

    @property
    def outputs(self) -> _Outputs:
        return self._outputs

    @property
    def state_reader(self) -> _State:
        return self._state

    @property
    def state_writer(self) -> _State:
        return self._state

    def refresh(self) -> None:
        self.refreshes += 1
        self.refreshed.set()

    @property
    def written_outputs(self) -> dict[str, Any] | None:
        return self._outputs.values


def setup_context(
    plugin_id: str, config: Mapping[str, Any] | None = None, clock: Clock | None = None
) -> tuple[SetupContext, RecordingRegistrar]:
    registrar = RecordingRegistrar()
    ctx = SetupContext(
        plugin_id=plugin_id,
        registrar=registrar,
        metrics=CollectorRegistry(),
        secrets=DictSecrets(),
        config=dict(config or {}),
        clock=clock or SystemClock(),
    )
    return ctx, registrar


async def drive(
    plugin: Plugin, ctx: FakeTaskContext, *, max_rounds: int = 1000, interval: float = 0.01
) -> list[PhaseInfo]:
    """Call `handle` until a terminal phase, waiting for `refresh()` or `interval` between
    rounds; then `finalize`. Returns every PhaseInfo reported, in order."""
    seen: list[PhaseInfo] = []
    for _ in range(max_rounds):
        ctx.refreshed.clear()
        transition: Transition = await plugin.handle(ctx)
        seen.append(transition.info)
        if transition.info.phase.is_terminal():
            await plugin.finalize(ctx)
            return seen
        await wait_event(ctx.refreshed, interval)
    raise AssertionError(f"plugin {plugin.id} did not finish in {max_rounds} rounds: {seen[-1]}")
