"""The history checker: what the task bodies really did (their start/end records), what
happened to their processes (the PidMonitor: deaths, stops and continues), the deaths of their
engines, the faults the test made, and the store's events and tables, against the invariants:

- quota holders (bodies live at once under one quota) never above the quota;
- lock holders exclusive;
- at most one live body per cache key, unless one of the two is an attempt resumed so long
  after its engine died that its reservation may have lapsed (then DESIGN.md section 6 says
  the loser is still driven to its end);
- one engine drives an execution at a time: no two bodies of one execution live at once on
  two engines, and no two bodies of one node at once;
- re-runs (a second start of one node attempt, or a new attempt without a failure) only of
  attempts in flight when their engine was killed (cause "kill"), or ended by fencing (cause
  "fenced": the body's worker died, or the engine stopped it, without its engine being killed;
  or it ended while its engine was paused or cut off, so its outcome could not be saved). Any
  other re-run (cause "other": a task that succeeded run again without a kill) is a violation;
- every execution terminal, the store agreeing with the history (a success has a body that
  succeeded, a failure event a body that failed), and no token or reservation left held.

A body's life ends at its end record, at the death of its process (a worker dies with its
engine, PR_SET_PDEATHSIG, or by its fencing watchdog), or at its engine's SIGKILL, whichever
is first; a pool worker runs many bodies in turn, so a death ends only the body it ran. A
body frozen with its engine does nothing while frozen: its life is the time it could act,
and an overlap within `slack` seconds after a thaw is the window no lease closes, reported
apart (lives.py).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from faults.lives import Overlap, Segment, merge, minus, overlap, peak
from sluice.spec.phases import CacheStatus, ExecutionPhase, NodePhase
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord

if TYPE_CHECKING:
    from faults.monitor import PidMonitor

Attempt = tuple[str, str, int]
SLACK = 0.5  # a thawed body's watchdog may take this long to see the jump and end it
SAVE_SLACK = 1.0  # a body that ended this long before its engine froze may have no record
CAUSES = ("kill", "fenced", "other")
KINDS = (  # (kind, a phrase its message has), in the order they are tried
    ("quota over", "bodies at once"),
    ("lock shared", "held it at once"),
    ("cache key computed twice at once", "computed at once"),
    ("execution driven by two engines", "driven by two engines"),
    ("node run twice at once", "still ran"),
    ("outcome saved twice", "outcome saved"),
    ("ran after its outcome was saved", "after its outcome was saved"),
    ("re-run without a kill or a fence", "without a kill or a fence"),
    ("left held", "left at the end"),
    ("execution not succeeded", "execution "),
)


@dataclass
class Window:
    """A fault the test made, from `start` to `end`: on the engines `pids`, or on all."""

    kind: str
    pids: frozenset[int] | None
    start: float
    end: float = math.inf

    def covers(self, pid: int, t: float) -> bool:
        """`t` fell in this fault on engine `pid` (or just before it, when the engine had no
        time to save what ended, or in the moment after it, before a fenced engine or a thawed
        watchdog acts)."""
        on = self.pids is None or pid in self.pids
        return on and self.start - SAVE_SLACK <= t <= self.end + SLACK


@dataclass
class Body:
    ex: str
    node: str
    attempt: int
    pid: int
    engine: int
    tags: list[str]
    start: float
    ended: float | None = None  # its end record
    ok: bool | None = None
    end: float = math.inf  # its life's end: the end record, its process's or engine's death
    killed: bool = False  # its engine was SIGKILLed after it started: its outcome may be lost
    death: float = math.inf  # its engine's death
    aborted: bool = False  # stopped by the engine (an attempt that lost what it held)
    process_died: bool = False  # its process died before any end record
    frozen: list[Segment] = field(default_factory=list)

    @property
    def key(self) -> Attempt:
        return (self.ex, self.node, self.attempt)

    def segments(self) -> list[Segment]:
        return minus([(self.start, self.end)], self.frozen)

    def thaws(self, slack: float) -> list[Segment]:
        return [(b, b + slack) for _, b in self.frozen if b < self.end]

    def __str__(self) -> str:
        life = f"[{self.start:.3f}, {self.end:.3f}]"
        stops = "".join(f" frozen [{a:.3f}, {b:.3f}]" for a, b in self.frozen)
        where = f"pid {self.pid} engine {self.engine}"
        return f"{self.ex}/{self.node}#{self.attempt} {where} {life}{stops}"


@dataclass
class Report:
    bodies: int = 0
    reruns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    restarts_after_stops: int = 0  # an attempt the engine stopped (lost claims) started again
    thaw_overlaps: int = 0  # overlaps inside the window after a thaw (not violations)
    thaw_overlap_max: float = 0.0
    violations: list[str] = field(default_factory=list)
    peaks: dict[str, int] = field(default_factory=dict)

    @property
    def reruns_at_kills(self) -> int:
        return self.reruns["kill"]

    def summary(self) -> str:
        causes = " ".join(f"{c}={n}" for c, n in self.reruns.items())
        return (
            f"bodies={self.bodies} reruns({causes}) "
            f"restarts_after_stops={self.restarts_after_stops} "
            f"thaw_overlaps={self.thaw_overlaps} (max {self.thaw_overlap_max:.3f}s) "
            f"violations={len(self.violations)} {self.kinds()}"
        )

    def kinds(self) -> dict[str, int]:
        """The violations counted by kind."""
        counts: dict[str, int] = {}
        for violation in self.violations:
            kind = next((k for k, m in KINDS if m in violation), "other")
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def figures(self) -> dict[str, object]:
        return {
            "violations": len(self.violations),
            "violation_kinds": self.kinds(),
            "bodies": self.bodies,
            "reruns": dict(self.reruns),
            "thaw_overlaps": self.thaw_overlaps,
            "thaw_overlap_max_s": round(self.thaw_overlap_max, 3),
        }


def read_history(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def build_bodies(
    lines: Iterable[Mapping[str, object]],
    deaths: Mapping[int, float],
    report: Report,
    monitor: PidMonitor | None = None,
) -> list[Body]:
    """The bodies of a history. `deaths`: SIGKILLed engines by pid; `monitor`: what became of
    the bodies' processes (None: a body dies only with its engine, as the probe's do)."""
    running: dict[int, Body] = {}  # the body each process runs now
    bodies: list[Body] = []
    for line in lines:
        pid = int(line["pid"])  # type: ignore[call-overload]
        if line["ev"] == "start":
            if pid in running:
                report.violations.append(f"{running[pid]} has no end, yet its pid started more")
            running[pid] = Body(
                str(line["ex"]),
                str(line["node"]),
                int(line["attempt"]),  # type: ignore[call-overload]
                pid,
                int(line["engine"]),  # type: ignore[call-overload]
                list(line["tags"]),  # type: ignore[call-overload]
                float(line["t"]),  # type: ignore[arg-type]
            )
            bodies.append(running[pid])
        elif pid in running and running[pid].key == (line["ex"], line["node"], line["attempt"]):
            body = running.pop(pid)
            body.ended = float(line["t"])  # type: ignore[arg-type]
            body.ok = bool(line["ok"])
            body.aborted = bool(line.get("aborted"))
        else:
            report.violations.append(f"an end record without a start: {line}")
    bodies.sort(key=lambda b: b.start)
    for body in bodies:
        _end_life(body, deaths, report, monitor)
    return bodies


def _end_life(
    body: Body, deaths: Mapping[int, float], report: Report, monitor: PidMonitor | None
) -> None:
    death = deaths.get(body.engine, math.inf)
    body.death = death
    body.killed = body.start <= death < math.inf
    gone, frozen = math.inf, []
    if monitor is not None:
        lives = [life for life in monitor.lives(body.pid) if life.first_seen <= body.start + 0.5]
        if lives:
            life = lives[-1]
            gone = math.inf if life.death is None else max(life.death, body.start)
            frozen = life.frozen
    ends = [t for t in (body.ended, gone, death) if t is not None]
    body.end = min(ends)
    if body.ended is not None and body.ended <= min(gone, death):
        pass
    elif body.end < math.inf:
        body.ok = None
        body.process_died = gone <= death
    else:
        report.violations.append(f"{body} never ended and its process never died")
    body.frozen = merge(_frozen_after_start(body, frozen))


def _frozen_after_start(body: Body, frozen: Iterable[Segment]) -> Iterator[Segment]:
    """The stops of the body's process while it lived. The monitor bounds a stop a poll wide
    on each side (from the last poll that saw it running to the first that saw it run again),
    and the start record proves the process ran at `start`: a stop seen around the start
    began just after it (the start nearer the stop's first bound) or ended just before it
    (nearer its last bound), since the stop itself lies inside its bounds."""
    for a, b in frozen:
        if b <= body.start or a >= body.end:
            continue
        if a < body.start and body.start - a >= b - body.start:
            continue  # it ended just before the start
        yield max(a, body.start), min(b, body.end)


TERMINAL_TASK_PHASES = {"SUCCESS", "RETRYABLE_FAILURE", "PERMANENT_FAILURE", "ABORTED"}


@dataclass
class _Judge:
    report: Report
    slack: float
    _counted: set[tuple[int, int]] = field(default_factory=set)

    def pair(self, first: Body, second: Body) -> Overlap:
        """How two bodies' lives overlapped; an overlap inside a thaw window is counted once
        per pair."""
        found = overlap(
            first.segments(),
            second.segments(),
            first.thaws(self.slack) + second.thaws(self.slack),
        )
        pair = (min(id(first), id(second)), max(id(first), id(second)))
        if found.strict == 0 and found.window > 0 and pair not in self._counted:
            self._counted.add(pair)
            self.report.thaw_overlaps += 1
            self.report.thaw_overlap_max = max(self.report.thaw_overlap_max, found.window)
        return found


def _pairs(bodies: Sequence[Body]) -> Iterable[tuple[Body, Body]]:
    ordered = sorted(bodies, key=lambda b: b.start)
    for i, first in enumerate(ordered):
        for second in ordered[i + 1 :]:
            if second.start >= first.end:
                continue
            yield first, second


def _saved_outcomes(
    events: Iterable[EventRecord], report: Report, lag: float
) -> dict[Attempt, float]:
    """The latest instant each attempt's outcome may have been first saved (an event's time
    is its engine's clock: one `lag` seconds behind wrote it that much later); an attempt
    whose outcome was saved twice was driven by two engines, each believing it owned it."""
    saved: dict[Attempt, float] = {}
    phases: dict[Attempt, list[str]] = defaultdict(list)
    for event in events:
        if event.node_id and event.phase in TERMINAL_TASK_PHASES:
            key = (event.execution_id, event.node_id, event.attempt)
            saved[key] = min(saved.get(key, math.inf), event.occurred_at + lag)
            phases[key].append(event.phase)
    for (ex, node, attempt), found in phases.items():
        if len(found) > 1:
            report.violations.append(
                f"{ex}/{node}#{attempt}: outcome saved {len(found)} times {found}"
            )
    return saved


def _rerun_cause(before: Body, after: Body, windows: Sequence[Window]) -> str | None:
    """Why `after` ran `before`'s attempt again (None: it did not, `after` is a retry)."""
    if before.killed:
        return "kill"
    if after.attempt == before.attempt + 1 and before.ok is False and not before.aborted:
        return None  # a retry after a failure the body reported
    if before.aborted or before.process_died:
        return "fenced"
    if before.ended is not None and any(w.covers(before.engine, before.ended) for w in windows):
        return "fenced"
    return "other"


def check_history(
    bodies: list[Body],
    quotas: Mapping[str, int],
    events: Iterable[EventRecord] = (),
    *,
    lapse_after: float,
    windows: Sequence[Window] = (),
    slack: float = SLACK,
    event_lag: float = 0.0,
) -> Report:
    """The invariants over the bodies, and the store's events to tell an outcome that was
    saved (so never re-run) from one a kill lost. `lapse_after`: how long after its engine's
    death an attempt's reservation may have lapsed (its heartbeat x grace, minus one
    heartbeat and some slack for a late renewal). `windows`: the faults the test made;
    `event_lag`: how far behind the test's clock the slowest engine's clock was."""
    report = Report(bodies=len(bodies))
    judge = _Judge(report, slack)
    saved = _saved_outcomes(events, report, event_lag)
    late = _reruns(bodies, saved, windows, report, judge, lapse_after)
    by_ex: dict[str, list[Body]] = defaultdict(list)
    for body in bodies:
        by_ex[body.ex].append(body)
    for ex, runs in by_ex.items():
        for a, b in _pairs(runs):
            if a.engine != b.engine and judge.pair(a, b).strict > 0:
                report.violations.append(f"execution {ex} driven by two engines at once: {a} & {b}")
    _holders(bodies, quotas, late, report, judge)
    return report


def _reruns(
    bodies: list[Body],
    saved: Mapping[Attempt, float],
    windows: Sequence[Window],
    report: Report,
    judge: _Judge,
    lapse_after: float,
) -> set[int]:
    """Each node's bodies in the order they started; which resumed attempts (by their first
    start) may have lost their reservation."""
    by_node: dict[tuple[str, str], list[Body]] = defaultdict(list)
    for body in bodies:
        by_node[(body.ex, body.node)].append(body)
    late: set[int] = set()
    for runs in by_node.values():
        for i, after in enumerate(runs[1:], 1):
            for earlier in runs[:i]:
                if judge.pair(earlier, after).strict > 0:
                    report.violations.append(f"{after} started while {earlier} still ran")
            before = runs[i - 1]
            if saved.get(after.key, math.inf) < after.start:
                report.violations.append(f"{after} ran again after its outcome was saved")
                continue
            cause = _rerun_cause(before, after, windows)
            if cause is None:
                continue
            report.reruns[cause] += 1
            if before.aborted:
                report.restarts_after_stops += 1
            if cause == "kill" and after.start - before.death >= lapse_after:
                late.add(id(after))
            if cause == "other":
                what = "succeeded" if before.ok else "did not fail"
                report.violations.append(
                    f"{after} ran again after {before}, which {what}, without a kill or a fence"
                )
    return late


def _holders(
    bodies: list[Body], quotas: Mapping[str, int], late: set[int], report: Report, judge: _Judge
) -> None:
    by_tag: dict[str, list[Body]] = defaultdict(list)
    for body in bodies:
        for tag in body.tags:
            by_tag[tag].append(body)
    for tag, holders in sorted(by_tag.items()):
        kind, _, name = tag.partition(":")
        found = peak([(b.segments(), b.thaws(judge.slack)) for b in holders])
        report.peaks[tag] = found.full
        if kind == "q":
            if found.strict > quotas[name]:
                pairs = [f"{a} & {b}" for a, b in _pairs(holders) if judge.pair(a, b).strict]
                report.violations.append(
                    f"quota {name} of {quotas[name]}: {found.strict} bodies at once: {pairs[:3]}"
                )
            elif found.full > quotas[name]:
                for a, b in _pairs(holders):
                    judge.pair(a, b)  # counts the overlaps inside thaw windows
        elif kind == "l":
            for a, b in _pairs(holders):
                if judge.pair(a, b).strict > 0:
                    report.violations.append(f"lock {name}: {a} and {b} held it at once")
        elif kind == "c":
            for a, b in _pairs(holders):
                if id(a) in late or id(b) in late:
                    continue
                if judge.pair(a, b).strict > 0:
                    report.violations.append(f"cache key {name[:12]}: {a} and {b} computed at once")


def check_store(
    report: Report,
    bodies: list[Body],
    executions: Mapping[str, ExecutionRecord],
    nodes: Mapping[str, list[NodeRecord]],
    events: list[EventRecord],
    left: Mapping[str, int],
) -> None:
    """The store's end state and events against the history."""
    for ex_id, record in executions.items():
        if not record.phase.is_terminal:
            report.violations.append(f"execution {ex_id} ended {record.phase.value}")
        elif record.phase is not ExecutionPhase.SUCCEEDED:
            report.violations.append(f"execution {ex_id} {record.phase.value}: {record.reason}")
    computed_once = any(b.ok for b in bodies if any(t.startswith("c:") for t in b.tags))
    for ex_id, node_records in nodes.items():
        for node in node_records:
            if node.phase is not NodePhase.SUCCEEDED:
                continue
            if node.cache_status == CacheStatus.HIT:
                if not computed_once:
                    report.violations.append(f"{ex_id}/{node.node_id}: a hit nobody computed")
                continue
            own = [b for b in bodies if b.key == (ex_id, node.node_id, node.attempt)]
            if not any(b.ok for b in own):
                report.violations.append(
                    f"{ex_id}/{node.node_id}#{node.attempt} SUCCEEDED without a body that did"
                )
    failing = {b.key for b in bodies if b.ok is False}
    for event in events:
        if (
            event.node_id
            and event.phase == "RETRYABLE_FAILURE"
            and "on purpose" in (event.reason or "")
            and (event.execution_id, event.node_id, event.attempt) not in failing
        ):
            report.violations.append(
                f"{event.execution_id}/{event.node_id}#{event.attempt}: a failure event "
                "without a body that failed"
            )
    for what, count in left.items():
        if count:
            report.violations.append(f"{count} {what} left at the end")
