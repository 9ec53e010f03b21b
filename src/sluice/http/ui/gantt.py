"""The timeline of an execution: one row per node, one bar per attempt, on a shared time axis
from the first attempt's start to the last end (or now, while attempts run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sluice.service.models import Attempt, Event, NodeExecution

LABEL_WIDTH = 150
PLOT_WIDTH = 600
ROW_HEIGHT = 24
AXIS_HEIGHT = 22
TICKS = 5
_WAITING = frozenset({"WAITING_FOR_RESOURCES", "WAITING_FOR_CACHE", "NOT_READY", "UNDEFINED"})
"""Task phases of an attempt that has not started running (its bar is all waiting)."""
MIN_BAR = 2
"""Width of the shortest bar, so an attempt of a few milliseconds stays visible."""


@dataclass(frozen=True)
class Bar:
    x: int
    width: int
    state: str
    title: str


@dataclass(frozen=True)
class Row:
    node: str
    y: int
    bars: list[Bar]


@dataclass(frozen=True)
class Tick:
    x: int
    label: str


@dataclass(frozen=True)
class Timeline:
    rows: list[Row]
    ticks: list[Tick]
    width: int
    height: int
    label_width: int = LABEL_WIDTH


def timeline(
    nodes: Sequence[NodeExecution], now: datetime, events: Sequence[Event] = ()
) -> Timeline | None:
    """None when no attempt has started yet. With the execution's events, an attempt's bar
    starts when it was first reported (waiting for a quota, a lock or the cache) and the
    waiting part is drawn apart from the running part."""
    first_seen = _first_seen(events)
    spans = [_span(n.node, a, first_seen, now) for n in nodes for a in n.attempts]
    starts = [s.begin for s in spans if s is not None]
    if not starts:
        return None
    start = min(starts)
    total = max((max(s.end for s in spans if s) - start).total_seconds(), 0.001)

    def x_of(at: datetime) -> int:
        return LABEL_WIDTH + round((at - start).total_seconds() / total * PLOT_WIDTH)

    rows = [
        Row(n.node, AXIS_HEIGHT + i * ROW_HEIGHT, _bars(n, first_seen, now, x_of))
        for i, n in enumerate(nodes)
    ]
    ticks = [
        Tick(LABEL_WIDTH + round(k / (TICKS - 1) * PLOT_WIDTH), _seconds(k / (TICKS - 1) * total))
        for k in range(TICKS)
    ]
    height = AXIS_HEIGHT + len(rows) * ROW_HEIGHT
    return Timeline(rows, ticks, LABEL_WIDTH + PLOT_WIDTH + 24, height)


@dataclass(frozen=True)
class _Span:
    begin: datetime
    """First reported (waiting included)."""
    running: datetime | None
    end: datetime


def _first_seen(events: Sequence[Event]) -> dict[tuple[str, int], datetime]:
    seen: dict[tuple[str, int], datetime] = {}
    for event in events:
        if event.node_id:
            key = (event.node_id, event.attempt)
            seen[key] = min(seen.get(key, event.occurred_at), event.occurred_at)
    return seen


def _span(
    node: str, attempt: Attempt, first_seen: dict[tuple[str, int], datetime], now: datetime
) -> _Span | None:
    if attempt.started_at is None:
        return None
    begin = min(first_seen.get((node, attempt.attempt), attempt.started_at), attempt.started_at)
    running = attempt.started_at if attempt.phase not in _WAITING else None
    return _Span(begin, running, attempt.ended_at or now)


def _bars(
    node: NodeExecution,
    first_seen: dict[tuple[str, int], datetime],
    now: datetime,
    x_of: Callable[[datetime], int],
) -> list[Bar]:
    bars: list[Bar] = []
    for attempt in node.attempts:
        span = _span(node.node, attempt, first_seen, now)
        if span is None:
            continue
        waited_until = span.running or span.end
        if waited_until > span.begin:
            title = (
                f"attempt {attempt.attempt}: waited {_seconds(_between(span.begin, waited_until))}"
            )
            bars.append(_bar(span.begin, waited_until, "waiting", title, x_of))
        if span.running is not None:
            took = _seconds(_between(span.running, span.end))
            title = f"attempt {attempt.attempt}: {attempt.phase}, {took}"
            bars.append(_bar(span.running, span.end, _state(attempt.phase), title, x_of))
    return bars


def _bar(
    begin: datetime, end: datetime, state: str, title: str, x_of: Callable[[datetime], int]
) -> Bar:
    x1, x2 = x_of(begin), x_of(end)
    return Bar(x1, max(x2 - x1, MIN_BAR), state, title)


def _between(begin: datetime, end: datetime) -> float:
    return (end - begin).total_seconds()


def _state(phase: str) -> str:
    return phase.lower().replace("_", "-")


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes}m{seconds:02d}s"
