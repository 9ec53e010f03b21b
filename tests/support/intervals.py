"""Checks on recorded critical sections: "start end" lines, one per holder."""

from __future__ import annotations

from pathlib import Path


def read(path: Path) -> list[tuple[float, float]]:
    if not path.exists():
        return []
    return [
        (float(a), float(b)) for a, b in (line.split() for line in path.read_text().splitlines())
    ]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak
