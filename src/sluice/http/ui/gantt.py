"""The timeline of an execution: one row per node, one bar per attempt, on a shared time axis
from the first attempt's start to the last end (or now, while attempts run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sluice.service.models import Attempt, NodeExecution

LABEL_WIDTH = 150
PLOT_WIDTH = 600
ROW_HEIGHT = 24
AXIS_HEIGHT = 22
TICKS = 5
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


def timeline(nodes: Sequence[NodeExecution], now: datetime) -> Timeline | None:
    """None when no attempt was reported yet. An attempt's bar starts when it was first
    reported (waiting for a quota, a lock or the cache), its waiting part drawn apart from its
    running part; it grows with the clock only while the attempt is live."""
    spans = [_span(a, now) for n in nodes for a in n.attempts]
    starts = [s.begin for s in spans if s is not None]
    if not starts:
        return None
    start = min(starts)
    total = max((max(s.end for s in spans if s) - start).total_seconds(), 0.001)

    def x_of(at: datetime) -> int:
        return LABEL_WIDTH + round((at - start).total_seconds() / total * PLOT_WIDTH)

    rows = [
        Row(n.node, AXIS_HEIGHT + i * ROW_HEIGHT, _bars(n, now, x_of)) for i, n in enumerate(nodes)
    ]
    ticks = [
        Tick(LABEL_WIDTH + round(k / (TICKS - 1) * PLOT_WIDTH), seconds(k / (TICKS - 1) * total))
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


def _span(attempt: Attempt, now: datetime) -> _Span | None:
    begin = attempt.first_seen_at or attempt.started_at
    if begin is None:
        return None
    running = attempt.started_at
    if attempt.ended_at is not None:
        end = attempt.ended_at
    elif attempt.live:
        end = now
    else:  # over, without a recorded end: never drawn as if it still ran
        end = running or begin
    return _Span(begin, running, max(end, begin))


def _bars(node: NodeExecution, now: datetime, x_of: Callable[[datetime], int]) -> list[Bar]:
    bars: list[Bar] = []
    for attempt in node.attempts:
        span = _span(attempt, now)
        if span is None:
            continue
        waited_until = span.running or span.end
        if waited_until > span.begin:
            title = (
                f"attempt {attempt.attempt}: waited {seconds(_between(span.begin, waited_until))}"
            )
            bars.append(_bar(span.begin, waited_until, "waiting", title, x_of))
        if span.running is not None:
            took = seconds(_between(span.running, span.end))
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


def seconds(value: float | None) -> str:
    """A duration a reader can compare: `850 µs`, `42 ms`, `1.234 s`, `3m07s`, `2h05m`."""
    if value is None:
        return ""
    if value == 0:
        return "0 s"
    if value < 0.001:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    minutes, rest = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s"
