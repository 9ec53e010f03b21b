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
    """None when no attempt has started yet."""
    spans = [(n, a) for n in nodes for a in n.attempts if a.started_at is not None]
    if not spans:
        return None
    start = min(a.started_at for _, a in spans if a.started_at)
    end = max((a.ended_at or now) for _, a in spans)
    total = max((end - start).total_seconds(), 0.001)

    def x_of(at: datetime) -> int:
        return LABEL_WIDTH + round((at - start).total_seconds() / total * PLOT_WIDTH)

    rows = [
        Row(n.node, AXIS_HEIGHT + i * ROW_HEIGHT, [_bar(a, x_of, now) for a in n.attempts])
        for i, n in enumerate(nodes)
    ]
    ticks = [
        Tick(LABEL_WIDTH + round(k / (TICKS - 1) * PLOT_WIDTH), _seconds(k / (TICKS - 1) * total))
        for k in range(TICKS)
    ]
    height = AXIS_HEIGHT + len(rows) * ROW_HEIGHT
    return Timeline(rows, ticks, LABEL_WIDTH + PLOT_WIDTH + 24, height)


def _bar(attempt: Attempt, x_of: Callable[[datetime], int], now: datetime) -> Bar:
    started = attempt.started_at or now
    x1, x2 = x_of(started), x_of(attempt.ended_at or now)
    seconds = ((attempt.ended_at or now) - started).total_seconds()
    title = f"attempt {attempt.attempt}: {attempt.phase}, {_seconds(seconds)}"
    state = attempt.phase.lower().replace("_", "-")
    return Bar(x1, max(x2 - x1, MIN_BAR), state, title)


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes}m{seconds:02d}s"
