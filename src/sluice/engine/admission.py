"""Admission of ready tasks under the engine's parallelism cap, in the configured order."""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class _Entry:
    created_at: float
    task_id: str


class FifoAdmission:
    """First come (execution creation time), first served; ties by task id."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self._heap: list[_Entry] = []
        self._waiting: set[str] = set()
        self._running: set[str] = set()

    def submit(self, task_id: str, created_at: float) -> None:
        if task_id in self._waiting or task_id in self._running:
            return
        self._waiting.add(task_id)
        heapq.heappush(self._heap, _Entry(created_at, task_id))

    def cancel(self, task_id: str) -> None:
        self._waiting.discard(task_id)

    def select(self) -> list[str]:
        chosen: list[str] = []
        while self._heap and len(self._running) < self.parallelism:
            entry = heapq.heappop(self._heap)
            if entry.task_id in self._waiting:
                self._waiting.discard(entry.task_id)
                self._running.add(entry.task_id)
                chosen.append(entry.task_id)
        return chosen

    def finish(self, task_id: str) -> None:
        self._running.discard(task_id)
        self._waiting.discard(task_id)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)
