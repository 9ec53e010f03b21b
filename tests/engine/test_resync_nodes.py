"""Which nodes the engine's resync steps again (Engine._to_resync): every active node, but
those waiting for a parallelism slot only (no locks), and an attempt, launched or re-verified
by this engine, of a plugin that wakes its nodes itself on every change (the python plugin).
The resync is the safety net for lost notifications: a node that could miss one (not launched
yet, waiting for a lock, a claim or the cache; an attempt this engine has not verified, e.g.
one it took over; another plugin's) must stay in it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sluice.engine.engine import Engine
from sluice.engine.state import ExecutionState, NodeState
from sluice.spec.models import NodeSpec, TaskSpec, WorkflowSpec
from sluice.spec.phases import NodePhase
from sluice.store.records import NodeRecord
from support.records import running_execution

NOW = 1_700_000_000.0


def node(node_id: str, task_type: str, **state: Any) -> NodeState:
    record = NodeRecord("ex1", node_id, phase=NodePhase.RUNNING)
    for key in ("attempt_started_at", "phase"):
        if key in state:
            setattr(record, key, state.pop(key))
    task = TaskSpec(name=f"t-{task_type}", version="1", type=task_type)
    return NodeState(NodeSpec(id=node_id, task=task.key), task, record, set(), **state)


def execution(*nodes: NodeState) -> ExecutionState:
    record = running_execution("ex1", NOW)
    return ExecutionState(record, WorkflowSpec(name="w", version="1"), {n.id: n for n in nodes}, {})


def to_resync(ex: ExecutionState) -> list[str]:
    engine = SimpleNamespace(_wakes_on_change=lambda ex, node: node.task.type == "python")
    return Engine._to_resync(engine, ex)  # type: ignore[arg-type]


def test_only_launched_verified_attempts_of_a_self_waking_plugin_are_left_out() -> None:
    ex = execution(
        node("running", "python", attempt_started_at=NOW, verified=True),
        node("taken_over", "python", attempt_started_at=NOW, verified=False),
        node("waiting_for_a_slot", "python", queued=True, lock_names=frozenset()),
        node("waiting_for_a_lock", "python", queued=True, lock_names=frozenset({"db/p1"})),
        node("waiting_for_the_cache", "python", waiting_since=NOW),
        node("not_started", "python", phase=NodePhase.NOT_STARTED),
        node("other_plugin", "shell", attempt_started_at=NOW, verified=True),
        node("done", "python", attempt_started_at=NOW, verified=True, phase=NodePhase.SUCCEEDED),
    )
    assert to_resync(ex) == [
        "taken_over",
        "waiting_for_a_lock",
        "waiting_for_the_cache",
        "not_started",
        "other_plugin",
    ]


def test_the_python_plugin_says_it_wakes_its_nodes() -> None:
    from sluice.plugins.builtin.python import PythonPlugin

    assert PythonPlugin(1, "i").wakes_on_change is True
