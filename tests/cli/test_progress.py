"""The live table of `sluice run`, rendered as a function over the service's view of the
records (no terminal)."""

from __future__ import annotations

from rich.console import Console, RenderableType

from sluice.cli.progress import progress_table as render
from sluice.service import convert
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.records import ExecutionRecord, NodeRecord


def execution(phase: ExecutionPhase, reason: str = "") -> ExecutionRecord:
    return ExecutionRecord(
        id="x1",
        project="p",
        domain="d",
        workflow_name="wf",
        workflow_version="1",
        phase=phase,
        inputs={},
        created_at=0.0,
        updated_at=0.0,
        launch_plan="lp",
        reason=reason,
    )


def progress_table(ex: ExecutionRecord, nodes: list[NodeRecord]) -> RenderableType:
    views = [convert.node_execution(n, None, None, []) for n in nodes]
    return render(convert.execution(ex, views, [], 0.0))


def text(shown: RenderableType) -> str:
    console = Console(width=200, record=True)
    console.print(shown)
    return console.export_text()


def test_a_node_shows_its_reason_as_now_stored_not_as_first_seen() -> None:
    node = NodeRecord("x1", "n1", phase=NodePhase.RUNNING, reason="waiting: position 3")
    ex = execution(ExecutionPhase.RUNNING)
    assert "position 3" in text(progress_table(ex, [node]))
    node.reason = "waiting: position 1"
    redrawn = text(progress_table(ex, [node]))
    assert "position 1" in redrawn
    assert "position 3" not in redrawn


def test_a_pending_execution_shows_its_phase_and_reason() -> None:
    ex = execution(ExecutionPhase.PENDING, "waiting: 2/2 active (a1, a2), position 3")
    shown = text(progress_table(ex, []))
    assert "PENDING" in shown
    assert "waiting: 2/2 active (a1, a2), position 3" in shown
