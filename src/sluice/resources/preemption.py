"""Priority preemption: which holders a higher-priority waiter may stop, and where it queues.

Pure functions, called by the memory and SQL backends inside their lock or transaction (the
rule is stated for users in docs/resources.md, "Priority preemption"):

- Only in a namespace where preemption is on (the operator's `quota set --preempt`, or
  `resources.preempt` in the config), only for a claim refused there by the namespace's room
  (never by its own project or project/domain cap: taking others' room would not help).
- Victims are live holders whose priority is STRICTLY lower than the asker's and that nobody
  marked yet, lowest priority first, then the most recently granted. A holder of equal or
  higher priority, or whose priority was not recorded, is never a victim.
- Never more than needed: the asker needs its units, less the free room and what the victims
  it already marked there hold. If every eligible victim together would not cover that, none
  is marked (stopping them would not let it run).
- Idempotent: asking again marks nothing new while the marked victims still hold.

A marked victim keeps its units until its engine stops it and releases them (or its lease
lapses, for a dead engine), so the quota is never exceeded. The preempter then moves ahead of
the lower-priority waiters queued before it (never ahead of an equal or higher priority one),
so the room its victims free goes to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sluice.resources.admission import Ask
from sluice.resources.models import Victim

__all__ = ["QUEUE_STEP", "HeldUnits", "Victim", "choose_victims", "queue_ahead"]

QUEUE_STEP = 1e-6
"""How far before the first lower-priority waiter it overtakes a preempter is queued (s)."""


@dataclass(frozen=True)
class HeldUnits:
    """A live holder as the victim choice sees it."""

    token: str
    units: int
    priority: int | None
    """None: not recorded (granted before preemption was on): never a victim."""
    since: float
    marked_by: str | None
    execution_id: str = ""
    node_id: str = ""


def choose_victims(
    token: str, priority: int, units: int, quota: int, holders: Sequence[HeldUnits]
) -> list[HeldUnits]:
    """The fewest new victims that free `units` for `token`, or [] if they cannot."""
    in_use = sum(h.units for h in holders)
    marked = sum(h.units for h in holders if h.marked_by == token)
    need = units - marked - max(0, quota - in_use)
    if need <= 0:
        return []
    eligible = sorted(
        (
            h
            for h in holders
            if h.token != token
            and h.marked_by is None
            and h.priority is not None
            and h.priority < priority
        ),
        key=lambda h: (h.priority, -h.since, h.token),
    )
    chosen: list[HeldUnits] = []
    for holder in eligible:
        if need <= 0:
            break
        chosen.append(holder)
        need -= holder.units
    return chosen if need <= 0 else []


def queue_ahead(asker: Ask, waiters: Iterable[Ask]) -> float | None:
    """The first-refusal time that puts a preempter ahead of the lower-priority waiters
    ranked before it, behind any of equal or higher priority; None: no change."""
    ahead = sorted((w for w in waiters if w.rank() < asker.rank()), key=Ask.rank)
    start = len(ahead)
    while start > 0 and ahead[start - 1].priority < asker.priority:
        start -= 1
    if start == len(ahead):
        return None
    return ahead[start].since - QUEUE_STEP
