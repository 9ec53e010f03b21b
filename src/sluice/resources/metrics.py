"""Prometheus series of the resource manager, on the registry it is given."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice.resources.backends.base import AllocationOutcome, AllocationRequest, NamespaceUsage

_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class ResourceMetrics:
    """Allocations by status, waits, tokens in use and waiters, per namespace.

    Without a registry the series go to a private one, so callers never branch on metrics.
    Every allocation and release updates them, so the children of a label set are kept
    rather than looked up with `labels()` each time.
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
        self.levels = _Levels()
        registry.register(self.levels)
        self._counted: dict[tuple[str, str], Counter] = {}
        self._waits: dict[str, Histogram] = {}

    def allocated(self, request: AllocationRequest, outcome: AllocationOutcome) -> None:
        result = outcome.result
        if result.granted:
            for claim in request.claims:
                self._count(claim.namespace, "granted")
                if outcome.waited_since is not None and outcome.judged_at is not None:
                    waited = max(0.0, outcome.judged_at - outcome.waited_since)
                    self._wait(claim.namespace).observe(waited)
        else:
            self._count(str(result.namespace), result.status.name.lower())
        self.observe(outcome.usage)

    def _count(self, namespace: str, status: str) -> None:
        child = self._counted.get((namespace, status))
        if child is None:
            child = self._counted[(namespace, status)] = self.allocations.labels(namespace, status)
        child.inc()

    def _wait(self, namespace: str) -> Histogram:
        child = self._waits.get(namespace)
        if child is None:
            child = self._waits[namespace] = self.wait_seconds.labels(namespace)
        return child

    def observe(self, usage: tuple[NamespaceUsage, ...]) -> None:
        levels = self.levels.by_namespace
        for entry in usage:
            if entry.in_use == 0 and entry.waiters == 0:
                # Lock names come and go by the thousand; idle ones leave no series behind.
                levels.pop(entry.namespace, None)
            else:
                levels[entry.namespace] = (entry.in_use, entry.waiters)


class _Levels(Collector):
    """The gauges of units held and of claims waiting, per namespace: plain values that a
    scrape reads, as two labelled Gauges would show them, without the cost of creating and
    removing a Gauge child each time a namespace turns busy or idle."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, tuple[int, int]] = {}

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return self._families({})

    def collect(self) -> Iterator[GaugeMetricFamily]:
        # A scrape may run in another thread: copying a dict is atomic under the GIL.
        return self._families(dict(self.by_namespace))

    @staticmethod
    def _families(levels: dict[str, tuple[int, int]]) -> Iterator[GaugeMetricFamily]:
        in_use = GaugeMetricFamily(
            "sluice_resource_tokens_in_use", "Units held per namespace", labels=["namespace"]
        )
        waiters = GaugeMetricFamily(
            "sluice_resource_waiters", "Claims waiting per namespace", labels=["namespace"]
        )
        for namespace, (held, waiting) in levels.items():
            in_use.add_metric([namespace], held)
            waiters.add_metric([namespace], waiting)
        yield in_use
        yield waiters
