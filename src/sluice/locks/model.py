"""What the lock scheduler is told about a task, and what it reports about a waiting one."""

from __future__ import annotations

from dataclasses import dataclass

SortKey = tuple[float | int | str, ...]
"""Smaller starts first; every key ends with the task id, so two keys are never equal."""


@dataclass(frozen=True)
class LockTask:
    """A ready task that needs every lock in `locks` (one unit each) to start."""

    id: str
    """Unique task id; the engine uses "<execution_id>/<node_id>"."""
    locks: frozenset[str]
    created_at: float
    """Creation time of the task's execution (workflow run), seconds."""
    group: str = ""
    """Execution id."""
    estimate: float = 1.0
    """Expected duration in seconds if known (a history average), else 1.0."""


@dataclass(frozen=True)
class WaitInfo:
    """One waiting task, as `LockScheduler.waiting()` reports it."""

    task_id: str
    position: int
    """1 for the task the policy would start first."""
    waited: float
    """Seconds since the task was submitted (a reject() does not reset it)."""
    urgent: bool
    """Waited at least the starvation bound: its locks are reserved against later arrivals."""
    blocked_by: tuple[str, ...]
    """Locks it cannot take now: held here, busy elsewhere, or reserved for an urgent task."""
    reason: str
    """Human explanation, e.g. "blocked by db/partition/17 (held by x1/n3)"."""
