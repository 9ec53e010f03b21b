"""Interval arithmetic over bodies' lives for the history checker.

A life is a list of half-open segments [a, b) in which the body could act: from its start to
its end, less the intervals it was frozen (SIGSTOPped with its engine). After each thaw comes
a window of `slack` seconds: a body frozen in the middle of its run by a whole-machine pause
runs on for a moment after the thaw, before its watchdog sees the time jump and ends it. No
lease-based system closes that window (docs/invariants.md); an overlap inside it is reported
apart, never as a violation. Everything else that overlaps is a violation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Segment = tuple[float, float]


def merge(segments: Iterable[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for a, b in sorted(s for s in segments if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def minus(segments: Sequence[Segment], holes: Sequence[Segment]) -> list[Segment]:
    """`segments` less every hole."""
    out = []
    for a, b in segments:
        pieces = [(a, b)]
        for ha, hb in holes:
            pieces = [p for x, y in pieces for p in ((x, min(y, ha)), (max(x, hb), y))]
            pieces = [(x, y) for x, y in pieces if y > x]
        out.extend(pieces)
    return merge(out)


def intersect(first: Sequence[Segment], second: Sequence[Segment]) -> list[Segment]:
    out = []
    for a, b in first:
        for c, d in second:
            lo, hi = max(a, c), min(b, d)
            if hi > lo:
                out.append((lo, hi))
    return merge(out)


def measure(segments: Iterable[Segment]) -> float:
    return sum(b - a for a, b in segments)


@dataclass(frozen=True)
class Overlap:
    """Seconds two lives overlapped beyond any thaw window (`strict`) and inside one."""

    strict: float
    window: float

    @property
    def any(self) -> bool:
        return self.strict > 0 or self.window > 0


def overlap(
    first: Sequence[Segment],
    second: Sequence[Segment],
    windows: Sequence[Segment],
) -> Overlap:
    both = intersect(first, second)
    if not both:
        return Overlap(0.0, 0.0)
    inside = intersect(both, merge(windows))
    return Overlap(measure(both) - measure(inside), measure(inside))


@dataclass(frozen=True)
class Peak:
    strict: int  # most lives at once, a life in its thaw window left out
    full: int  # most lives at once


def peak(lives: Sequence[tuple[Sequence[Segment], Sequence[Segment]]]) -> Peak:
    """`lives`: (segments, thaw windows) of each holder."""
    points = sorted({t for segs, wins in lives for s in (*segs, *wins) for t in s})
    strict = full = 0
    for lo, hi in itertools.pairwise(points):
        mid = (lo + hi) / 2
        alive = [wins for segs, wins in lives if any(a <= mid < b for a, b in segs)]
        full = max(full, len(alive))
        strict = max(strict, sum(not any(a <= mid < b for a, b in w) for w in alive))
    return Peak(strict, full)
