"""Prometheus metrics of the engine: task phase changes, finished executions, and how many
tasks wait for or hold a slot. Gauges read the scheduler when scraped, so the hot path pays
nothing for them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

_Child = Any
"""A labelled child of a prometheus Counter (its type is private to prometheus_client)."""


class EngineMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.transitions = Counter(
            "sluice_task_phase_transitions",
            "Task phase changes recorded as events, by phase",
            ["phase"],
            registry=registry,
        )
        self.executions = Counter(
            "sluice_executions_finished",
            "Executions that reached a terminal phase, by phase",
            ["phase"],
            registry=registry,
        )
        self.waiting = Gauge(
            "sluice_engine_tasks_waiting",
            "Ready tasks waiting for a slot or their locks (the engine's queue depth)",
            registry=registry,
        )
        self.running = Gauge(
            "sluice_engine_tasks_running",
            "Tasks holding one of the engine's slots",
            registry=registry,
        )
        self.owned = Gauge(
            "sluice_engine_executions", "Executions this process's engine drives", registry=registry
        )
        self._children: dict[tuple[str, str], _Child] = {}

    def _child(self, counter: Counter, name: str, label: str) -> _Child:
        """The labelled child, looked up once: labels() costs tens of microseconds a call
        (validation, a lock, a tuple key), twice per task on the hot path."""
        child = self._children.get((name, label))
        if child is None:
            child = self._children[name, label] = counter.labels(label)
        return child

    def transition(self, phase: str) -> None:
        """Count a task phase change recorded as an event."""
        self._child(self.transitions, "transitions", phase).inc()

    def finished(self, phase: str) -> None:
        """Count an execution that reached a terminal phase."""
        self._child(self.executions, "executions", phase).inc()

    def watch(
        self, waiting: Callable[[], int], running: Callable[[], int], owned: Callable[[], int]
    ) -> None:
        """Read the gauges from these functions at each scrape."""
        self.waiting.set_function(waiting)
        self.running.set_function(running)
        self.owned.set_function(owned)
