"""The history checker judges the nemeses right: synthetic histories with known answers.

Each case is a history the nemesis tests can produce (pool workers running bodies in turn,
bodies frozen with their engine, worker deaths, fault windows, skewed event times), and the
checker must find exactly the violations it holds, and count the re-runs by their cause.
"""

from __future__ import annotations

import math

from faults.history import Body, Report, Window, build_bodies, check_history
from faults.monitor import ProcessLife
from sluice.store.records import EventRecord

QUOTAS = {"faults-q": 1, "faults-pair": 2}


class Monitor:
    """What a PidMonitor saw: each pid's one process life."""

    def __init__(self, *lives: ProcessLife) -> None:
        self._lives = {life.pid: [life] for life in lives}

    def lives(self, pid: int) -> list[ProcessLife]:
        return self._lives.get(pid, [])


def life(
    pid: int, died: float | None = None, frozen: tuple[float, float] | None = None
) -> ProcessLife:
    found = ProcessLife(pid, "1", 0.0, died if died is not None else 100.0, 0.0)
    found.dead_at = None if died is None else died + 0.01
    found.frozen = [frozen] if frozen else []
    return found


def start(
    t: float, ex: str, node: str, pid: int, engine: int, *tags: str, attempt: int = 0
) -> dict[str, object]:
    return {
        "ev": "start",
        "t": t,
        "ex": ex,
        "node": node,
        "attempt": attempt,
        "pid": pid,
        "engine": engine,
        "tags": list(tags),
    }


def end(
    t: float, ex: str, node: str, pid: int, engine: int, ok: bool = True, attempt: int = 0
) -> dict[str, object]:
    return {
        "ev": "end",
        "t": t,
        "ex": ex,
        "node": node,
        "attempt": attempt,
        "pid": pid,
        "engine": engine,
        "tags": [],
        "ok": ok,
    }


def judge(
    lines: list[dict[str, object]],
    monitor: Monitor,
    *,
    kills: dict[int, float] | None = None,
    windows: list[Window] | None = None,
    events: list[EventRecord] | None = None,
    lag: float = 0.0,
) -> tuple[list[Body], Report]:
    early = Report()
    bodies = build_bodies(lines, kills or {}, early, monitor)  # type: ignore[arg-type]
    report = check_history(
        bodies, QUOTAS, events or [], lapse_after=math.inf, windows=windows or [], event_lag=lag
    )
    report.violations[:0] = early.violations
    return bodies, report


def test_a_pool_worker_runs_bodies_in_turn_and_its_death_ends_only_the_running_one() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1, "q:faults-q"),
        end(2.0, "a", "held", 10, 1),
        start(2.5, "b", "held", 10, 1, "q:faults-q"),  # the same worker, the next job
        start(6.0, "b", "held", 20, 2, "q:faults-q", attempt=1),  # after the worker died
        end(7.0, "b", "held", 20, 2, attempt=1),
    ]
    bodies, report = judge(lines, Monitor(life(10, died=5.0), life(20)))
    assert [(b.start, b.end) for b in bodies] == [(1.0, 2.0), (2.5, 5.0), (6.0, 7.0)]
    assert bodies[1].process_died and bodies[1].ok is None
    assert report.violations == []
    assert report.reruns == {"kill": 0, "fenced": 1, "other": 0}


def test_a_body_running_on_while_its_engine_is_paused_holds_the_quota_twice() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1, "q:faults-q"),
        start(5.0, "b", "held", 20, 2, "q:faults-q"),  # the lease lapsed: b was granted it
        end(6.0, "b", "held", 20, 2),
        end(8.0, "a", "held", 10, 1),  # the paused engine's worker ran on
    ]
    _, report = judge(
        lines, Monitor(life(10), life(20)), windows=[Window("pause", frozenset({1}), 2.0, 9.0)]
    )
    assert any("quota faults-q of 1: 2 bodies at once" in v for v in report.violations)


def test_an_overlap_just_after_a_thaw_is_the_window_not_a_violation() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1, "q:faults-q"),  # frozen 2.0-9.0 with its engine
        start(5.0, "b", "held", 20, 2, "q:faults-q"),
        end(9.5, "b", "held", 20, 2),
    ]
    monitor = Monitor(life(10, died=9.3, frozen=(2.0, 9.0)), life(20))
    _, report = judge(lines, monitor)
    assert report.violations == []
    assert report.thaw_overlaps == 1 and 0.29 < report.thaw_overlap_max < 0.31


def test_a_stop_first_seen_a_poll_before_the_start_froze_the_body_that_started() -> None:
    """CI saw this: a body started 10 ms before its whole host was frozen for 6 s; the poll
    before the stop was earlier than the start, and the freeze was dropped, making the
    lawful grant to another engine during the freeze an overlap."""
    lines = [
        start(1.005, "a", "held", 10, 1, "q:faults-q"),  # then frozen until 7.0
        start(5.0, "b", "held", 20, 2, "q:faults-q"),
        end(5.5, "b", "held", 20, 2),
    ]
    monitor = Monitor(life(10, died=7.03, frozen=(1.0, 7.0)), life(20))
    bodies, report = judge(lines, monitor)
    assert bodies[0].frozen == [(1.005, 7.0)]
    assert report.violations == []


def test_a_stop_that_ended_a_poll_before_the_start_froze_nothing_of_the_body() -> None:
    lines = [
        start(7.005, "a", "held", 10, 1, "q:faults-q"),  # resumed at about 7.0, then started
        start(8.0, "b", "held", 20, 2, "q:faults-q"),
        end(8.5, "b", "held", 20, 2),
        end(9.0, "a", "held", 10, 1),
    ]
    monitor = Monitor(life(10, frozen=(1.0, 7.01)), life(20))
    bodies, report = judge(lines, monitor)
    assert bodies[0].frozen == []
    assert any("2 bodies at once" in v for v in report.violations)


def test_an_overlap_past_the_thaw_window_is_a_violation() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1, "q:faults-q"),
        start(5.0, "b", "held", 20, 2, "q:faults-q"),
        end(11.0, "b", "held", 20, 2),
    ]
    monitor = Monitor(life(10, died=10.0, frozen=(2.0, 9.0)), life(20))  # ran 1 s after thaw
    _, report = judge(lines, monitor)
    assert any("2 bodies at once" in v for v in report.violations)


def test_bodies_of_one_execution_on_two_engines_at_once_are_a_violation() -> None:
    lines = [
        start(1.0, "a", "flaky", 10, 1),
        start(1.5, "a", "locked", 20, 2, "l:part/0"),  # another engine took it over
        end(2.0, "a", "flaky", 10, 1),
        end(2.5, "a", "locked", 20, 2),
    ]
    _, report = judge(lines, Monitor(life(10), life(20)))
    assert [v for v in report.violations if "driven by two engines at once" in v]


def test_a_succeeded_task_run_again_without_a_kill_or_a_fence_is_a_violation() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1),
        end(2.0, "a", "held", 10, 1),
        start(3.0, "a", "held", 20, 2),
        end(4.0, "a", "held", 20, 2),
    ]
    _, report = judge(lines, Monitor(life(10), life(20)))
    assert report.reruns["other"] == 1
    assert any("which succeeded, without a kill or a fence" in v for v in report.violations)
    # Killed before it could save: a re-run at-least-once allows.
    _, killed = judge(lines, Monitor(life(10), life(20)), kills={1: 2.2})
    assert killed.violations == [] and killed.reruns["kill"] == 1
    # Ended while its engine was cut off: its outcome could not be saved.
    cut = [Window("cut", frozenset({1}), 1.5, 2.8)]
    _, fenced = judge(lines, Monitor(life(10), life(20)), windows=cut)
    assert fenced.violations == [] and fenced.reruns["fenced"] == 1


def test_an_outcome_saved_before_a_rerun_is_judged_on_the_slowest_clock() -> None:
    lines = [
        start(1.0, "a", "held", 10, 1),
        end(2.0, "a", "held", 10, 1),
        start(30.0, "a", "held", 20, 2),
        end(31.0, "a", "held", 20, 2),
    ]
    saved = [EventRecord("a", "SUCCESS", 2.1, node_id="held", attempt=0)]
    _, report = judge(lines, Monitor(life(10), life(20)), events=saved, kills={1: 2.05})
    assert any("after its outcome was saved" in v for v in report.violations)
    # Written by an engine 90 s behind, the event may stand for a save after the re-run.
    _, lagged = judge(lines, Monitor(life(10), life(20)), events=saved, kills={1: 2.05}, lag=90)
    assert lagged.violations == []


def test_two_saved_outcomes_of_one_attempt_are_a_violation() -> None:
    lines = [start(1.0, "a", "held", 10, 1), end(2.0, "a", "held", 10, 1)]
    twice = [EventRecord("a", "SUCCESS", t, node_id="held", attempt=0) for t in (2.1, 3.0)]
    _, report = judge(lines, Monitor(life(10)), events=twice)
    assert any("outcome saved 2 times" in v for v in report.violations)
