"""Prometheus metrics of the engine: task phase changes, finished executions, and how many
tasks wait for or hold a slot. Gauges read the scheduler when scraped, so the hot path pays
nothing for them."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge


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

    def watch(
        self, waiting: Callable[[], int], running: Callable[[], int], owned: Callable[[], int]
    ) -> None:
        """Read the gauges from these functions at each scrape."""
        self.waiting.set_function(waiting)
        self.running.set_function(running)
        self.owned.set_function(owned)
