"""Prometheus series of the resource manager, on the registry it is given."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sluice.resources.backends.base import AllocationOutcome, AllocationRequest, NamespaceUsage

_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class ResourceMetrics:
    """Allocations by status, waits, tokens in use and waiters, per namespace.

    Without a registry the series go to a private one, so callers never branch on metrics.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        labels = ["namespace"]
        self.allocations = Counter(
            "sluice_resource_allocations",
            "Allocation answers by namespace and status",
            [*labels, "status"],
            registry=registry,
        )
        self.wait_seconds = Histogram(
            "sluice_resource_wait_seconds",
            "Time from a claim's first refusal to its grant",
            labels,
            buckets=_WAIT_BUCKETS,
            registry=registry,
        )
        self.in_use = Gauge(
            "sluice_resource_tokens_in_use", "Units held per namespace", labels, registry=registry
        )
        self.waiters = Gauge(
            "sluice_resource_waiters", "Claims waiting per namespace", labels, registry=registry
        )

    def allocated(self, request: AllocationRequest, outcome: AllocationOutcome) -> None:
        result = outcome.result
        if result.granted:
            for claim in request.claims:
                self.allocations.labels(claim.namespace, "granted").inc()
                if outcome.waited_since is not None:
                    waited = max(0.0, request.now - outcome.waited_since)
                    self.wait_seconds.labels(claim.namespace).observe(waited)
        else:
            self.allocations.labels(result.namespace, result.status.name.lower()).inc()
        self.observe(outcome.usage)

    def observe(self, usage: tuple[NamespaceUsage, ...]) -> None:
        for entry in usage:
            if entry.in_use == 0 and entry.waiters == 0:
                # Lock names come and go by the thousand; idle ones leave no series behind.
                for gauge in (self.in_use, self.waiters):
                    with contextlib.suppress(KeyError):
                        gauge.remove(entry.namespace)
                continue
            self.in_use.labels(entry.namespace).set(entry.in_use)
            self.waiters.labels(entry.namespace).set(entry.waiters)
