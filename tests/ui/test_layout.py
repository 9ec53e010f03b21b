"""The graph's layered layout and the timeline's bars, on views built by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sluice.http.ui import gantt, graph
from sluice.service.models import Attempt, NodeExecution

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def node(name: str, *after: str, phase: str = "SUCCEEDED", **fields: object) -> NodeExecution:
    return NodeExecution(
        node=name,
        task=f"t.{name}",
        phase=phase,
        task_phase=str(fields.pop("task_phase", phase)),
        attempt=1,
        cache_status="DISABLED",
        reservation_status="DISABLED",
        depends_on=list(after),
        **fields,  # type: ignore[arg-type]
    )


def test_each_node_sits_one_column_right_of_its_furthest_dependency() -> None:
    nodes = [node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c"), node("e", "a", "d")]
    assert graph.columns(nodes) == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 3}
    layout = graph.layout(nodes)
    assert len(layout.edges) == 6
    x = {box.node.node: box.x for box in layout.boxes}
    assert x["a"] < x["b"] == x["c"] < x["d"] < x["e"]
    assert all(box.x + graph.NODE_WIDTH <= layout.width for box in layout.boxes)


def test_a_running_node_is_coloured_by_what_it_is_doing() -> None:
    waiting = node("w", phase="RUNNING", task_phase="WAITING_FOR_RESOURCES")
    assert graph.phase_class(waiting) == "waiting-for-resources"
    assert graph.phase_class(node("f", phase="FAILED")) == "failed"


def test_a_long_name_is_cut_in_its_box_and_whole_in_its_view() -> None:
    name = "a_node_with_a_rather_long_name"
    box = graph.layout([node(name)]).boxes[0]
    assert box.label.endswith("…") and len(box.label) == graph.LABEL_CHARS
    assert box.node.node == name


def test_an_attempt_that_waited_is_drawn_as_a_wait_then_a_run() -> None:
    ran = Attempt(
        attempt=1,
        phase="SUCCESS",
        first_seen_at=T0,
        started_at=T0 + timedelta(seconds=4),
        ended_at=T0 + timedelta(seconds=10),
    )
    line = gantt.timeline([node("n", attempts=[ran])], T0)
    assert line is not None
    wait, run = line.rows[0].bars
    assert wait.state == "waiting" and run.state == "success"
    assert wait.x == gantt.LABEL_WIDTH and run.x + run.width == gantt.LABEL_WIDTH + gantt.PLOT_WIDTH
    assert abs(wait.width - 0.4 * gantt.PLOT_WIDTH) <= 1


def test_an_ended_attempt_without_an_end_never_grows_with_the_clock() -> None:
    """Issue 26: attempts of a quota holder, whose last event is RELEASED, were drawn up to
    now: a map of 0.1 s read as 14 minutes. Only a live attempt grows."""
    over = Attempt(attempt=1, phase="RUNNING", first_seen_at=T0, started_at=T0, live=False)
    live = Attempt(attempt=1, phase="RUNNING", first_seen_at=T0, started_at=T0, live=True)
    done = Attempt(
        attempt=1, phase="SUCCESS", first_seen_at=T0, started_at=T0, ended_at=T0 + timedelta(0, 1)
    )
    later = T0 + timedelta(minutes=14)
    line = gantt.timeline([node("a", attempts=[over]), node("b", attempts=[done])], later)
    assert line is not None and line.ticks[-1].label == "1.000 s"
    line = gantt.timeline([node("a", attempts=[live]), node("b", attempts=[done])], later)
    assert line is not None and line.ticks[-1].label == "14m00s"


def test_durations_show_milliseconds() -> None:
    shown = [gantt.seconds(s) for s in (0.0004, 0.042, 0.9994, 1.2345, 42.0, 187.0, 7500.0)]
    assert shown == ["400 µs", "42 ms", "999 ms", "1.234 s", "42.0 s", "3m07s", "2h05m"]


def test_no_timeline_before_any_attempt() -> None:
    assert gantt.timeline([node("n", phase="NOT_STARTED")], T0) is None


def test_a_big_execution_is_polled_less_often() -> None:
    from sluice.http.ui.executions import POLL_MAX, poll_seconds

    assert [poll_seconds(n) for n in (0, 1, 100, 101, 500)] == [1, 1, 1, 2, 5]
    assert poll_seconds(100_000) == POLL_MAX
