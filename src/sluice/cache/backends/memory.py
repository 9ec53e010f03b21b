"""The in-process backend: dicts, for tests and single-process use.

Each primitive runs without awaiting anything between its check and its write, so on one
event loop it is as atomic as the SQL statement it mirrors. Outputs are kept as canonical
JSON text and parsed on every read, so callers never share (and mutate) a stored value and
values round-trip exactly as they do through the database.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import replace

from sluice.cache.base import CatalogRepository, EntryRepository, ReservationRepository
from sluice.cache.models import CacheEntry, EntryInfo, Reservation
from sluice.clock import Clock, SystemClock
from sluice.spec.canonical import canonical_json


class MemoryReservations(ReservationRepository):
    def __init__(self) -> None:
        self._rows: dict[str, Reservation] = {}

    async def get(self, key: str) -> Reservation | None:
        return self._rows.get(key)

    async def create(self, reservation: Reservation, now: float) -> bool:
        if reservation.key in self._rows:
            return False
        self._rows[reservation.key] = reservation
        return True

    async def update_if_expired_or_owned(
        self, reservation: Reservation, now: float, succeeds: str | None = None
    ) -> bool:
        current = self._rows.get(reservation.key)
        if current is None or not (
            current.expires_at <= now or current.owner_id in (reservation.owner_id, succeeds)
        ):
            return False
        self._rows[reservation.key] = reservation
        return True

    async def delete_by_key_and_owner(self, key: str, owner_id: str) -> bool:
        current = self._rows.get(key)
        if current is None or current.owner_id != owner_id:
            return False
        del self._rows[key]
        return True

    async def delete_expired(self, now: float) -> list[str]:
        expired = sorted(key for key, row in self._rows.items() if row.expires_at <= now)
        for key in expired:
            del self._rows[key]
        return expired

    async def list_all(self) -> list[Reservation]:
        return [self._rows[key] for key in sorted(self._rows)]


class MemoryEntries(EntryRepository):
    def __init__(self) -> None:
        self._rows: dict[str, tuple[CacheEntry, str]] = {}  # entry without outputs, JSON text

    async def get(self, key: str) -> CacheEntry | None:
        row = self._rows.get(key)
        return None if row is None else replace(row[0], outputs=json.loads(row[1]))

    async def insert(self, key: str, entry: CacheEntry) -> bool:
        if key in self._rows:
            return False
        self._store(key, entry)
        return True

    async def replace(
        self, key: str, entry: CacheEntry, *, created_before: float | None = None
    ) -> bool:
        current = self._rows.get(key)
        if (
            current is not None
            and created_before is not None
            and not current[0].created_at < created_before
        ):
            return False
        self._store(key, entry)
        return True

    async def list_all(
        self, *, task_name: str | None = None, limit: int | None = None
    ) -> list[EntryInfo]:
        infos = [
            EntryInfo(key, e.task_name, e.cache_version, e.created_at, e.source)
            for key, (e, _) in self._rows.items()
            if task_name is None or e.task_name == task_name
        ]
        infos.sort(key=lambda info: (-info.created_at, info.key))
        return infos if limit is None else infos[:limit]

    async def delete(self, keys: Collection[str] = (), *, task_name: str | None = None) -> int:
        wanted = set(keys)
        doomed = [
            key for key, (e, _) in self._rows.items() if key in wanted or e.task_name == task_name
        ]
        for key in doomed:
            del self._rows[key]
        return len(doomed)

    def _store(self, key: str, entry: CacheEntry) -> None:
        self._rows[key] = (replace(entry, outputs={}), canonical_json(entry.outputs))


class MemoryRepository(CatalogRepository):
    """A real backend held in this process's memory; its clock authority is `clock`."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.entries = MemoryEntries()
        self.reservations = MemoryReservations()
        self._clock = clock or SystemClock()

    async def now(self) -> float:
        return self._clock.now()
