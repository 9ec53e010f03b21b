"""The plugin's context is kept for an attempt (engine/invoker.py), yet every call sees what a
fresh context would show: no outputs, its state as the engine last recorded it, unwritten.

A plugin writes its state and outputs through the context; the engine takes them from it
after the call. A kept context that carried a previous call's outputs or written flag, or a
state the engine has since reset, would hand a plugin (or the engine) stale values."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from sluice.clock import FakeClock
from sluice.config import EngineConfig
from sluice.engine.invoker import PluginInvoker
from sluice.engine.state import NodeState
from sluice.plugins.core.phase import PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginProperties
from sluice.spec.models import NodeSpec, TaskSpec
from sluice.store.records import NodeRecord
from support.records import running_execution

NOW = 1_700_000_000.0


class Scheduling:
    def refresh(self, execution_id: str, node_id: str) -> None:
        return None

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None:
        return None


class Plugin:
    """Writes state and outputs on its first call only; says what each call saw."""

    id = "p"
    properties = PluginProperties(inline_calls=True)

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any, bool]] = []

    async def handle(self, ctx: Any) -> Transition:
        self.seen.append((ctx.state_reader.get(), ctx.outputs.values, ctx.state.written))
        if len(self.seen) == 1:
            ctx.state_writer.put(1, {"job": "j1"})
            ctx.outputs.put({"o": 1})
        return Transition.to(PhaseInfo.running(1, "running"))


class Registry:
    def __init__(self, plugin: Plugin) -> None:
        self.plugin = plugin

    def resolve(self, task_type: str, overrides: Any = ()) -> Plugin:
        return self.plugin


class Execution:
    id = "ex1"

    def __init__(self) -> None:
        self.record = running_execution("ex1", NOW)
        self.changed: set[str] = set()

    def mark_changed(self, node: NodeState) -> None:
        self.changed.add(node.id)


def setup() -> tuple[PluginInvoker, Plugin, Execution, NodeState]:
    plugin = Plugin()
    services = SimpleNamespace(
        config=EngineConfig(),
        clock=FakeClock(NOW),
        registry=Registry(plugin),
        secrets=None,
        engine_id="e",
        logs=None,
    )
    invoker = PluginInvoker(services, Scheduling())  # type: ignore[arg-type]
    task = TaskSpec(name="t", version="1")
    node = NodeState(NodeSpec(id="n1", task="t"), task, NodeRecord("ex1", "n1"), set())
    return invoker, plugin, Execution(), node


def handle(invoker: PluginInvoker, ex: Execution, node: NodeState) -> Any:
    return asyncio.run(invoker.handle(ex, node))  # type: ignore[arg-type]


def test_a_second_call_sees_the_recorded_state_and_no_outputs() -> None:
    invoker, plugin, ex, node = setup()
    handle(invoker, ex, node)
    kept = node.context
    assert node.record.plugin_state == {"job": "j1"}
    assert node.record.plugin_state_version == 1
    handle(invoker, ex, node)
    assert node.context is kept  # kept for the attempt
    assert plugin.seen == [(None, None, False), ({"job": "j1"}, None, False)]


def test_a_call_that_writes_nothing_leaves_the_record_alone() -> None:
    invoker, _, ex, node = setup()
    handle(invoker, ex, node)
    ex.changed.clear()
    node.record.plugin_state = {"job": "j1", "engine": "changed it"}  # as if persisted
    handle(invoker, ex, node)
    assert ex.changed == set()
    assert node.record.plugin_state == {"job": "j1", "engine": "changed it"}


def test_state_reset_by_the_engine_is_what_the_next_call_reads() -> None:
    invoker, plugin, ex, node = setup()
    handle(invoker, ex, node)
    node.record.plugin_state, node.record.plugin_state_version = None, 0  # restart_attempt
    handle(invoker, ex, node)
    assert plugin.seen[1] == (None, None, False)


def test_a_new_attempt_gets_a_new_context() -> None:
    invoker, _, ex, node = setup()
    handle(invoker, ex, node)
    first = node.context
    node.record.attempt += 1
    handle(invoker, ex, node)
    assert node.context is not first
    assert node.context is not None and node.context.metadata.attempt == 1


def test_a_forgotten_context_is_made_again() -> None:
    invoker, _, ex, node = setup()
    handle(invoker, ex, node)
    first = node.context
    invoker.forget_context(node)
    handle(invoker, ex, node)
    assert node.context is not None and node.context is not first
