"""One attempt's log on the writing side: the TaskLogWriter a plugin gets (AttemptLog), and
how a batch of its lines becomes segment writes and index rows (SegmentPlan).

Rotation: lines go to the open segment until it reaches `segment_bytes`, then a new one is
started. Past `max_bytes_per_attempt` (live segments summed) the oldest segment after the
first is removed: a long log keeps its head (how the task started) and its newest tail (how
it ended), and the index keeps the removed segment's row (removed = 1) so readers say how much
is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sluice.clock import Clock
from sluice.logs.index import AttemptKey, Segment
from sluice.logs.lines import LogLine, Stream, split_text

Tap = Callable[[AttemptKey, LogLine], None]


class AttemptLog:
    """A TaskLogWriter: `write` only buffers (never blocks, never raises); the sink flushes
    the buffer in the background. Past `max_pending` buffered bytes (the store is slow or
    down), lines are dropped and counted."""

    def __init__(self, key: AttemptKey, clock: Clock, max_pending: int, tap: Tap) -> None:
        self.key = key
        self._clock = clock
        self._max_pending = max_pending
        self._tap = tap
        self.pending: list[LogLine] = []
        self.pending_bytes = 0
        self.dropped = 0
        self.ended = False

    def write(self, text: str, stream: str = "stdout", at: float | None = None) -> None:
        when = self._clock.now() if at is None else at
        kind: Stream = "stderr" if stream == "stderr" else "stdout"
        for text_line in split_text(text):
            line = LogLine(when, kind, text_line)
            self._tap(self.key, line)
            if self.ended:  # the attempt is over (or logs are disabled): nothing is kept
                continue
            if self.pending_bytes >= self._max_pending:
                self.dropped += 1
                continue
            self.pending.append(line)
            self.pending_bytes += len(text_line) + 32

    def take(self) -> tuple[list[LogLine], int]:
        """The buffered lines and the count dropped since the last take; empties the buffer."""
        lines, dropped = self.pending, self.dropped
        self.pending, self.pending_bytes, self.dropped = [], 0, 0
        return lines, dropped


@dataclass(frozen=True)
class Limits:
    segment_bytes: int
    max_bytes: int
    appendable: bool
    writer: str


Locate = Callable[[int], tuple[str, str]]
"""Segment number -> (path in the log store, URI for the index)."""


@dataclass
class SegmentState:
    """What a writer knows of an attempt's segments: the live ones (oldest first; the last is
    the open one while this writer writes) and the next number to use."""

    key: AttemptKey
    live: list[Segment]
    next_number: int
    current: Segment | None = None
    path: str = ""
    content: bytearray = field(default_factory=bytearray)
    """The open segment's bytes, kept only when the store cannot append."""

    @classmethod
    def resume(
        cls, key: AttemptKey, rows: list[Segment], now: float
    ) -> tuple[SegmentState, list[Segment]]:
        """Continue after the segments already indexed (an earlier writer of this attempt,
        e.g. an engine that died): its open segments are closed now, as nobody appends to
        them any more. Returns the state and the rows to save."""
        closed = [s if s.closed_at is not None else replace(s, closed_at=now) for s in rows]
        changed = [s for s, before in zip(closed, rows, strict=True) if s is not before]
        number = max((s.segment for s in rows), default=-1) + 1
        return cls(key, [s for s in closed if not s.removed], number), changed


@dataclass
class FileWrite:
    path: str
    new: bytes
    whole: bytes | None


@dataclass
class SegmentPlan:
    """The writes, removals and index rows of one flush of one attempt."""

    writes: list[FileWrite] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    rows: dict[int, Segment] = field(default_factory=dict)


@dataclass
class _Chunk:
    data: bytearray = field(default_factory=bytearray)
    count: int = 0
    first: float = 0.0
    last: float = 0.0

    def add(self, line: LogLine, data: bytes) -> None:
        self.first = line.at if not self.count else self.first
        self.last, self.count = line.at, self.count + 1
        self.data += data


def plan_flush(
    state: SegmentState,
    lines: list[LogLine],
    dropped: int,
    locate: Locate,
    limits: Limits,
    close_at: float | None,
) -> SegmentPlan:
    """Place `lines` in segments (rotating at the segment size), remove the oldest segments
    past the attempt's limit, and close the open segment at `close_at` if the attempt ended.
    Updates `state`; the caller applies the plan's file operations, then saves its rows."""
    plan = SegmentPlan()
    chunk = _Chunk()
    for line in lines:
        data = line.encode()
        if state.current is None:
            _open_next(state, plan, locate, limits)
        elif _full(state.current, chunk, len(data), limits):
            _emit(state, plan, chunk, limits)
            _close_current(state, plan, line.at)
            _open_next(state, plan, locate, limits)
            chunk = _Chunk()
        chunk.add(line, data)
    _emit(state, plan, chunk, limits)
    if dropped:
        if state.current is None:
            _open_next(state, plan, locate, limits)
        assert state.current is not None
        _update(
            state, plan, replace(state.current, dropped_lines=state.current.dropped_lines + dropped)
        )
    _rotate(state, plan, limits)
    if close_at is not None and state.current is not None:
        _close_current(state, plan, close_at)
    return plan


def _full(current: Segment, chunk: _Chunk, size: int, limits: Limits) -> bool:
    used = current.bytes + len(chunk.data)
    return used > 0 and used + size > limits.segment_bytes


def _open_next(state: SegmentState, plan: SegmentPlan, locate: Locate, limits: Limits) -> None:
    number = state.next_number
    state.next_number += 1
    state.path, uri = locate(number)
    state.content = bytearray()
    segment = Segment(state.key, number, uri, limits.writer)
    state.live.append(segment)
    state.current = segment
    plan.rows[number] = segment


def _emit(state: SegmentState, plan: SegmentPlan, chunk: _Chunk, limits: Limits) -> None:
    if not chunk.count or state.current is None:
        return
    new = bytes(chunk.data)
    whole = None
    if not limits.appendable:
        state.content += new
        whole = bytes(state.content)
    plan.writes.append(FileWrite(state.path, new, whole))
    _update(state, plan, state.current.grown(len(new), chunk.count, chunk.first, chunk.last))


def _update(state: SegmentState, plan: SegmentPlan, segment: Segment) -> None:
    if state.live and state.live[-1].segment == segment.segment:
        state.live[-1] = segment  # the open segment: the usual case
    else:
        state.live = [segment if s.segment == segment.segment else s for s in state.live]
    if state.current is not None and state.current.segment == segment.segment:
        state.current = segment
    plan.rows[segment.segment] = segment


def _close_current(state: SegmentState, plan: SegmentPlan, at: float) -> None:
    assert state.current is not None
    _update(state, plan, replace(state.current, closed_at=at))
    state.current = None
    state.content = bytearray()


def _rotate(state: SegmentState, plan: SegmentPlan, limits: Limits) -> None:
    """Remove the oldest segment after the first while the live ones pass the limit."""
    while len(state.live) > 2 and sum(s.bytes for s in state.live) > limits.max_bytes:
        victim = state.live.pop(1)
        closed_at = victim.closed_at if victim.closed_at is not None else victim.last_at
        plan.rows[victim.segment] = replace(victim, removed=True, closed_at=closed_at)
        plan.removals.append(victim.uri)
