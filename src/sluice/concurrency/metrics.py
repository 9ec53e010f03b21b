"""Prometheus metrics of the concurrency controller."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.decisions = Counter(
            "sluice_concurrency_decisions_total",
            "Controller decisions, by kind (promote, skip, abort, wait)",
            ["decision"],
            registry=registry,
        )
        self.pending = Gauge(
            "sluice_concurrency_pending_executions",
            "PENDING executions the controller holds back",
            registry=registry,
        )
        self.active = Gauge(
            "sluice_concurrency_active_executions",
            "Active executions (every non-terminal phase after PENDING)",
            registry=registry,
        )
        self.leader = Gauge(
            "sluice_concurrency_leader",
            "1 while this process is the live controller",
            registry=registry,
        )
        self.promotion_latency = Histogram(
            "sluice_concurrency_promotion_latency_seconds",
            "From the end of an execution to the QUEUED commit of the PENDING one taking its slot",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
