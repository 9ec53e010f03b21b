"""Shared by the tests of plugins that run tasks on a remote cluster (Ray, Dask): a task
context to drive a plugin directly, and a run through a real engine with its task log."""

from __future__ import annotations

from typing import Any

from sluice.config import Settings
from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.testing import FakeTaskContext
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import NodeRecord
from support.engine import Outcome, run


def plugin_context(task: Any, execution_id: str, **inputs: object) -> FakeTaskContext:
    """A context for driving a plugin directly with the SDK task `task` and `inputs`."""
    meta = TaskExecutionMetadata(
        execution_id=execution_id, project="p", domain="d", node_id="n0", attempt=0, task_name="t"
    )
    return FakeTaskContext(task=task.spec, inputs=inputs, metadata=meta)


async def run_logged(settings: Settings, target: Any) -> tuple[Outcome, list[str]]:
    """Run `target` through a real engine on `settings`; the outcome and its task log's lines."""
    rt = await Runtime.open(settings)
    try:
        result = await run(rt, target)
        assert rt.task_logs is not None
        await rt.task_logs.flush()  # the sink writes at its interval: read what it holds now
        logged = [e.line.text for e in await rt.log_reader().lines(result.record.id)]
    finally:
        await rt.close()
    return result, logged


def assert_squares_flowed(result: Outcome, logged: list[str]) -> None:
    """The `squares` flow of the plugin's test flows: both squares ran remotely, their prints
    reached the task log (without the plugin's result line) and the sum flowed on."""
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": 1 + 4}
    assert {"squaring 1", "squaring 2"} <= {text.split(" in pid")[0] for text in logged}, logged
    assert not any("sluice-result" in text for text in logged)


def assert_failed_with_traceback(result: Outcome) -> NodeRecord:
    """The `broken_flow` of the plugin's test flows: FAILED with the user's traceback."""
    assert result.record.phase is ExecutionPhase.FAILED
    (node,) = result.nodes.values()
    error = node.error
    assert error is not None and error["kind"] == "USER", error
    assert "ValueError: no square for 7 today" in error["message"]
    assert "Traceback" in error["message"]
    return node
