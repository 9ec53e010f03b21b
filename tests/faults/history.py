"""The history checker: what the task bodies really did (their start/end records), the deaths
of their engines, and the store's events and tables, against the invariants:

- quota holders (bodies live at once under one quota) never above the quota;
- lock holders exclusive;
- at most one live body per cache key, unless one of the two is an attempt resumed so long
  after its engine died that its reservation may have lapsed (then DESIGN.md section 6 says
  the loser is still driven to its end);
- re-runs (a second start of one node attempt, or a new attempt without a failure) only of
  attempts in flight when their engine was killed;
- every execution terminal, the store agreeing with the history (a success has a body that
  succeeded, a failure event a body that failed), and no token or reservation left held.

A body dies with its engine (the probe plugin sets PR_SET_PDEATHSIG), so a body's life ends
at its end record or at its engine's death, whichever is first.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice.spec.phases import CacheStatus, ExecutionPhase, NodePhase
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord

Attempt = tuple[str, str, int]


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
    end: float = math.inf  # its life's end: the end record or its engine's death
    killed: bool = False  # its engine died after it started: its outcome may be lost
    death: float = math.inf  # its engine's death
    aborted: bool = False  # stopped by the engine (an attempt that lost what it held)

    @property
    def key(self) -> Attempt:
        return (self.ex, self.node, self.attempt)

    def __str__(self) -> str:
        life = f"[{self.start:.3f}, {self.end:.3f}]"
        return f"{self.ex}/{self.node}#{self.attempt} pid {self.pid} {life}"


@dataclass
class Report:
    bodies: int = 0
    reruns_at_kills: int = 0
    restarts_after_stops: int = 0  # an attempt the engine stopped (lost claims) started again
    violations: list[str] = field(default_factory=list)
    peaks: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"bodies={self.bodies} reruns_at_kills={self.reruns_at_kills} "
            f"restarts_after_stops={self.restarts_after_stops} "
            f"violations={len(self.violations)}"
        )


def read_history(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def build_bodies(
    lines: Iterable[Mapping[str, object]], deaths: Mapping[int, float], report: Report
) -> list[Body]:
    by_pid: dict[int, Body] = {}
    for line in lines:
        pid = int(line["pid"])  # type: ignore[call-overload]
        if line["ev"] == "start":
            by_pid[pid] = Body(
                str(line["ex"]),
                str(line["node"]),
                int(line["attempt"]),  # type: ignore[call-overload]
                pid,
                int(line["engine"]),  # type: ignore[call-overload]
                list(line["tags"]),  # type: ignore[call-overload]
                float(line["t"]),  # type: ignore[arg-type]
            )
        elif pid in by_pid:
            by_pid[pid].ended = float(line["t"])  # type: ignore[arg-type]
            by_pid[pid].ok = bool(line["ok"])
            by_pid[pid].aborted = bool(line.get("aborted"))
        else:
            report.violations.append(f"an end record without a start: {line}")
    bodies = sorted(by_pid.values(), key=lambda b: b.start)
    for body in bodies:
        death = deaths.get(body.engine, math.inf)
        body.death = death
        body.killed = body.start <= death < math.inf
        if body.ended is not None and body.ended <= death:
            body.end = body.ended
        elif death < math.inf:
            body.end, body.ok = death, None
        else:
            report.violations.append(f"{body} never ended and its engine was not killed")
    return bodies


def _overlaps(bodies: list[Body]) -> list[tuple[Body, Body]]:
    """Every pair of bodies alive at one instant (an end before a start at the same time)."""
    pairs = []
    ordered = sorted(bodies, key=lambda b: b.start)
    for i, first in enumerate(ordered):
        for second in ordered[i + 1 :]:
            if second.start >= first.end:
                continue
            pairs.append((first, second))
    return pairs


def _peak(bodies: list[Body]) -> int:
    points = sorted([(b.start, 1) for b in bodies] + [(b.end, -1) for b in bodies])
    current = peak = 0
    for _, delta in points:
        current += delta
        peak = max(peak, current)
    return peak


TERMINAL_TASK_PHASES = {"SUCCESS", "RETRYABLE_FAILURE", "PERMANENT_FAILURE", "ABORTED"}


def check_history(
    bodies: list[Body],
    quotas: Mapping[str, int],
    events: Iterable[EventRecord] = (),
    *,
    lapse_after: float,
) -> Report:
    """The invariants over the bodies, and the store's events to tell an outcome that was
    saved (so never re-run) from one a kill lost. `lapse_after`: how long after its engine's
    death an attempt's reservation may have lapsed (its heartbeat x grace, minus one
    heartbeat and some slack for a late renewal)."""
    report = Report(bodies=len(bodies))
    saved: dict[Attempt, float] = {}
    for event in events:
        if event.node_id and event.phase in TERMINAL_TASK_PHASES:
            key = (event.execution_id, event.node_id, event.attempt)
            saved[key] = min(saved.get(key, math.inf), event.occurred_at)
    by_tag: dict[str, list[Body]] = defaultdict(list)
    for body in bodies:
        for tag in body.tags:
            by_tag[tag].append(body)
    # Re-runs, and which resumed attempt may have lost its reservation: each node's bodies in
    # the order they started.
    by_node: dict[tuple[str, str], list[Body]] = defaultdict(list)
    for body in bodies:
        by_node[(body.ex, body.node)].append(body)
    late: set[int] = set()
    for runs in by_node.values():
        for before, after in itertools.pairwise(runs):
            if before.end > after.start:
                report.violations.append(f"{after} started while {before} still ran")
            elif saved.get(after.key, math.inf) < after.start:
                report.violations.append(f"{after} ran again after its outcome was saved")
            elif before.killed:
                # The kill lost what the store had not saved yet: this attempt, or the retry
                # the engine had started, is run again (at-least-once).
                report.reruns_at_kills += 1
                if after.start - before.death >= lapse_after:
                    late.add(after.pid)
            elif after.attempt == before.attempt:
                if before.aborted:
                    report.restarts_after_stops += 1
                else:
                    report.violations.append(f"{after} re-ran {before}, which was not killed")
            elif after.attempt == before.attempt + 1 and before.ok is False:
                continue  # a retry after a failure
            else:
                report.violations.append(f"{after} followed {before}, which did not fail")
    for tag, holders in sorted(by_tag.items()):
        kind, _, name = tag.partition(":")
        report.peaks[tag] = _peak(holders)
        if kind == "q":
            if report.peaks[tag] > quotas[name]:
                pairs = [f"{a} & {b}" for a, b in _overlaps(holders)][:3]
                report.violations.append(
                    f"quota {name} of {quotas[name]}: {report.peaks[tag]} bodies at once: {pairs}"
                )
        elif kind == "l":
            for a, b in _overlaps(holders):
                report.violations.append(f"lock {name}: {a} and {b} held it at once")
        elif kind == "c":
            for a, b in _overlaps(holders):
                if a.pid in late or b.pid in late:
                    continue
                report.violations.append(f"cache key {name[:12]}: {a} and {b} computed at once")
    return report


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
