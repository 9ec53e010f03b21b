"""Human reasons for waiting tasks, as `sluice executions show` prints them."""

from __future__ import annotations

from sluice.locks.model import LockTask, WaitInfo
from sluice.locks.table import LockTable
from sluice.locks.waitlist import WaitList

_NAMED_LOCKS = 3
"""Reasons name this many blocking locks, then count the rest."""


class WaitExplainer:
    """Explains one waiting task at a time against a snapshot of the scheduler's state."""

    def __init__(
        self,
        locks: LockTable,
        waitlist: WaitList,
        slots: tuple[int, int],
    ) -> None:
        self._locks = locks
        self._waitlist = waitlist
        self._in_use, self._parallelism = slots

    def explain(
        self, task: LockTask, since: float, urgent: bool, now: float, position: int
    ) -> WaitInfo:
        blocking = [
            (name, why)
            for name in sorted(task.locks)
            if (why := self._why_unavailable(name, since)) is not None
        ]
        reason = self._reason(blocking)
        if urgent:
            reason = f"urgent: waited {now - since:.0f}s, its locks are reserved; {reason}"
        return WaitInfo(
            task_id=task.id,
            position=position,
            waited=now - since,
            urgent=urgent,
            blocked_by=tuple(name for name, _ in blocking),
            reason=reason,
        )

    def _reason(self, blocking: list[tuple[str, str]]) -> str:
        if blocking:
            named = ", ".join(f"{name} ({why})" for name, why in blocking[:_NAMED_LOCKS])
            more = len(blocking) - _NAMED_LOCKS
            return f"blocked by {named}" + (f" and {more} more locks" if more > 0 else "")
        if self._in_use >= self._parallelism:
            return f"parallelism {self._in_use}/{self._parallelism} in use"
        return "ready: starts at the next select()"

    def _why_unavailable(self, name: str, since: float) -> str | None:
        if self._locks.is_busy_elsewhere(name):
            return "held by another engine"
        if not self._locks.is_available(name):
            return self._held_by(name)
        urgent_at = self._waitlist.reserved_at(name)
        if urgent_at is not None and since > urgent_at:
            return f"reserved for urgent {self._waitlist.reserving_task(name)}"
        return None

    def _held_by(self, name: str) -> str:
        holders = ", ".join(sorted(self._locks.holders(name)))
        capacity = self._locks.capacity(name)
        if capacity == 1:
            return f"held by {holders}"
        return f"{capacity}/{capacity} held by {holders}"
