"""Task cache and serialized reservations (DESIGN section 6).

`cache_key` names a computation; a `Catalog` stores its outputs (`get`, `put`) and lets one
owner at a time compute a key (`get_or_extend_reservation`, `release_reservation`), as policy
over a `CatalogRepository` (backends: memory, SQL on the store's database).
"""

from __future__ import annotations

from sluice.cache.backends import MemoryRepository, SqlRepository, open_repository
from sluice.cache.base import (
    CACHE_CHANNEL,
    CatalogRepository,
    EntryRepository,
    ReservationRepository,
)
from sluice.cache.catalog import (
    DEFAULT_HEARTBEAT_GRACE_PERIOD_MULTIPLIER,
    DEFAULT_MAX_RESERVATION_HEARTBEAT,
    Catalog,
)
from sluice.cache.keys import KEY_SCHEME, cache_key
from sluice.cache.metrics import CacheMetrics
from sluice.cache.models import (
    CacheEntry,
    CacheSource,
    EntryInfo,
    Reservation,
    ReservationInfo,
    checked_outputs,
)

__all__ = [
    "CACHE_CHANNEL",
    "DEFAULT_HEARTBEAT_GRACE_PERIOD_MULTIPLIER",
    "DEFAULT_MAX_RESERVATION_HEARTBEAT",
    "KEY_SCHEME",
    "CacheEntry",
    "CacheMetrics",
    "CacheSource",
    "Catalog",
    "CatalogRepository",
    "EntryInfo",
    "EntryRepository",
    "MemoryRepository",
    "Reservation",
    "ReservationInfo",
    "ReservationRepository",
    "SqlRepository",
    "cache_key",
    "checked_outputs",
    "open_repository",
]
