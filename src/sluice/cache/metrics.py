"""Prometheus metrics of the catalog, registered on the registry the caller injects."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, float("inf"))


class CacheMetrics:
    """Counters of lookups, puts and reservations, and the reservation wait histogram.

    Without a registry the metrics go to a private one nobody exports, so a catalog always
    counts and the default global registry is never touched.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()

        def counter(name: str, documentation: str) -> Counter:
            return Counter(f"sluice_cache_{name}", documentation, registry=registry)

        self.hits = counter("hits", "Cache lookups that found a fresh entry")
        self.misses = counter("misses", "Cache lookups that found no entry or a too old one")
        self.puts = counter("puts", "Entries stored")
        self.put_conflicts = counter("put_conflicts", "Puts refused: an entry existed")
        self.reservations_acquired = counter(
            "reservations_acquired", "Reservations created or taken over after expiry"
        )
        self.reservations_extended = counter(
            "reservations_extended", "Reservations extended by their owner"
        )
        self.reservations_held_elsewhere = counter(
            "reservations_held_elsewhere", "Reservation requests answered with another owner"
        )
        self.reservations_released = counter(
            "reservations_released", "Reservations released by their owner"
        )
        self.reservations_swept = counter(
            "reservations_swept", "Expired reservations deleted by the sweeper"
        )
        self.reservation_wait_seconds = Histogram(
            "sluice_cache_reservation_wait_seconds",
            "Time tasks waited for another owner's reservation (observed by the engine)",
            registry=registry,
            buckets=_WAIT_BUCKETS,
        )
