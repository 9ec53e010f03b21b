"""What an attempt of a node is, in one place: when it was first reported, when it started and
ended, how it ended and why. Every surface (the API's attempts, `sluice executions show`, the
web UI's attempts table and timeline) reads attempts from here.

An attempt's events mix the task's phases (the plugin's `Phase` names: QUEUED, RUNNING,
SUCCESS, RETRYABLE_FAILURE...) with what the engine did around it: claims GRANTED and
RELEASED, CLAIMS_LOST, RESERVATION_LOST. Only the task's phases say what the attempt did; the
others are bookkeeping and never become its phase, its end or its error (a quota holder's last
event is RELEASED, after its failure). The node's record knows its current attempt better than
its events do (a live attempt has not ended; one that ended without a terminal event, when its
execution was aborted or failed around it, ended when the node did).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.plugins.core.phase import Phase
from sluice.service import models as m
from sluice.spec.phases import NodePhase
from sluice.store.records import EventRecord, NodeRecord

TASK_PHASES = frozenset(p.name for p in Phase)
TERMINAL = frozenset(p.name for p in Phase if p.is_terminal())
FAILURES = frozenset(p.name for p in Phase if p.is_failure())
WAITING = frozenset(
    {
        Phase.UNDEFINED.name,
        Phase.NOT_READY.name,
        Phase.WAITING_FOR_RESOURCES.name,
        Phase.WAITING_FOR_CACHE.name,
    }
)
"""Task phases of an attempt that has not started its task yet."""
_ENDED_AS = {
    NodePhase.SUCCEEDED: Phase.SUCCESS.name,
    NodePhase.FAILED: Phase.PERMANENT_FAILURE.name,
    NodePhase.ABORTED: Phase.ABORTED.name,
}


def attempts(
    node: NodeRecord, events: Iterable[EventRecord], log_bytes: Mapping[int, int]
) -> list[m.Attempt]:
    """Each attempt of `node` (numbered from 1) that has an event, oldest first."""
    by_attempt: dict[int, list[EventRecord]] = {}
    for event in events:
        if event.node_id == node.node_id:
            by_attempt.setdefault(event.attempt, []).append(event)
    return [
        attempt(node, number, seen, log_bytes.get(number))
        for number, seen in sorted(by_attempt.items())
    ]


def attempt(
    node: NodeRecord, number: int, seen: list[EventRecord], log_bytes: int | None
) -> m.Attempt:
    """Attempt `number` (the store's, from 0) of `node` from its events `seen` (in order)."""
    phases = [e for e in seen if e.phase in TASK_PHASES]
    ended = next((e for e in phases if e.phase in TERMINAL), None)
    current = number == node.attempt
    live = current and not node.phase.is_terminal and ended is None
    started = _started(node, phases, current)
    ended_at = ended.occurred_at if ended else None
    phase = ended.phase if ended else (phases[-1].phase if phases else "")
    error = ended.info if ended is not None and ended.phase in FAILURES else None
    if current and ended is None:
        phase, ended_at, error = _current(node, phase, ended_at, error)
    last = ended or (phases[-1] if phases else None)
    return m.Attempt(
        attempt=number + 1,
        phase=phase or "UNDEFINED",
        first_seen_at=m.utc(min(seen[0].occurred_at, started or seen[0].occurred_at)),
        started_at=m.utc(started),
        ended_at=m.utc(ended_at),
        duration=_duration(started, ended_at),
        reason=_reason(last, error),
        error=error,
        live=live,
        log_bytes=log_bytes,
    )


def _started(node: NodeRecord, phases: list[EventRecord], current: bool) -> float | None:
    """When the task started (its claims granted, a worker asked): never a wait's time."""
    if current and node.attempt_started_at is not None:
        return node.attempt_started_at
    return next((e.occurred_at for e in phases if e.phase not in WAITING), None)


def _current(
    node: NodeRecord, phase: str, ended_at: float | None, error: dict[str, object] | None
) -> tuple[str, float | None, dict[str, object] | None]:
    """The node's current attempt without a terminal event: live (its phase is the node's task
    phase now), or ended with the node (aborted or failed around it)."""
    if not node.phase.is_terminal:
        return (Phase(node.task_phase).name if node.task_phase else phase), ended_at, error
    phase = _ENDED_AS.get(node.phase, node.phase.value)
    failed = node.phase is NodePhase.FAILED
    return phase, node.ended_at, (node.error if failed else error)


def _duration(started: float | None, ended: float | None) -> float | None:
    if started is None or ended is None:
        return None
    return round(max(ended - started, 0.0), 6)


def _reason(last: EventRecord | None, error: dict[str, object] | None) -> str:
    """The last task phase's reason; for a failure, its first line only: the error holds the
    rest (a Python task's reason is its whole traceback, shown once, with the error)."""
    if last is None:
        return ""
    if error is not None:
        lines = [line for line in last.reason.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""
    return last.reason
