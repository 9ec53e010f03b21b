"""A priority queue of ready tasks whose keys change: stale entries are skipped, not removed."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from sluice.locks.model import SortKey


class ReadyQueue:
    """Min-heap of (key, task id, version); an entry is live only while its version is current.

    Re-keying or invalidating a task costs one push (O(log n)) instead of a search; the caller
    rebuilds the heap when dead entries outnumber live ones, keeping memory proportional.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[SortKey, str, int]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, key: SortKey, task_id: str, version: int) -> None:
        heapq.heappush(self._heap, (key, task_id, version))

    def pop(self, is_live: Callable[[str, int], bool]) -> str | None:
        """Remove and return the live task with the smallest key, or None."""
        while self._heap:
            _, task_id, version = heapq.heappop(self._heap)
            if is_live(task_id, version):
                return task_id
        return None

    def rebuild(self, live: Iterable[tuple[SortKey, str, int]]) -> None:
        self._heap = list(live)
        heapq.heapify(self._heap)
