"""The storage seam of the catalog: a few atomic primitives, no policy.

A backend offers two repositories (entries, reservations) and a clock authority. Every
primitive is atomic in exactly one way (one SQL statement; one uninterrupted step in memory)
and takes the time it compares against as an argument, so the policy in `catalog.py` decides
what "now" is. Times are float seconds since the epoch. Unreachable storage raises StoreError;
a lost compare-and-set is a False return, never an exception.

Backends publish a wake-up (channel `CACHE_CHANNEL`, payload = the key) in the transaction
that stores an entry or deletes a reservation, where they have a cross-process notifier.
"""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from sluice.cache.models import CacheEntry, EntryInfo, Reservation

CACHE_CHANNEL = "cache"


class ReservationRepository(abc.ABC):
    """One row per cache key: who may compute it, until when."""

    @abc.abstractmethod
    async def get(self, key: str) -> Reservation | None:
        """The reservation of `key`, expired or not; None if there is no row."""

    @abc.abstractmethod
    async def create(self, reservation: Reservation, now: float) -> bool:
        """Insert `reservation`; False (nothing written) if `key` already has a row."""

    @abc.abstractmethod
    async def update_if_expired_or_owned(
        self, reservation: Reservation, now: float, succeeds: str | None = None
    ) -> bool:
        """Replace the row of `reservation.key` by `reservation` in one compare-and-set, only
        if that row expired (`expires_at <= now`) or belongs to `reservation.owner_id`, or to
        `succeeds` (the same owner in an earlier ownership epoch, taken over).

        False if nothing was written: another owner holds an unexpired row, or there is none.
        """

    @abc.abstractmethod
    async def delete_by_key_and_owner(self, key: str, owner_id: str) -> bool:
        """Delete the row of `key` if `owner_id` holds it (expired or not); idempotent.

        True if a row was deleted (and its waiters are woken), False if there was none to delete.
        """

    @abc.abstractmethod
    async def delete_expired(self, now: float) -> list[str]:
        """Delete every row with `expires_at <= now`; returns their keys (waiters are woken)."""

    @abc.abstractmethod
    async def list_all(self) -> list[Reservation]:
        """Every row, expired or not, ordered by key."""


class EntryRepository(abc.ABC):
    """One row per cache key: the outputs computed for it."""

    @abc.abstractmethod
    async def get(self, key: str) -> CacheEntry | None:
        """The entry of `key`, however old; None if there is none."""

    @abc.abstractmethod
    async def insert(self, key: str, entry: CacheEntry) -> bool:
        """Store `entry`; False (nothing written) if `key` already has an entry."""

    @abc.abstractmethod
    async def replace(
        self, key: str, entry: CacheEntry, *, created_before: float | None = None
    ) -> bool:
        """Store `entry`, replacing an existing one; with `created_before`, only an existing
        entry created strictly before it is replaced. False if nothing was written."""

    @abc.abstractmethod
    async def list_all(
        self, *, task_name: str | None = None, limit: int | None = None
    ) -> list[EntryInfo]:
        """Entries (without outputs), newest first, optionally of one task name."""

    @abc.abstractmethod
    async def delete(self, keys: Collection[str] = (), *, task_name: str | None = None) -> int:
        """Delete the entries whose key is in `keys` or whose task is `task_name`; returns how
        many were deleted."""


@dataclass(frozen=True)
class Claimed:
    """The answer of one reservation claim: the reservation of the key now, and how."""

    reservation: Reservation
    how: Literal["elsewhere", "acquired", "extended"]


class CatalogRepository(abc.ABC):
    """A catalog backend: its two repositories and its clock authority."""

    entries: EntryRepository
    reservations: ReservationRepository

    @abc.abstractmethod
    async def now(self) -> float:
        """The backend's notion of the current time: the database server's clock where all
        processes share one server (PostgreSQL), otherwise the local system clock."""

    async def claim_reservation(
        self,
        key: str,
        owner_id: str,
        heartbeat: float,
        span: float,
        now: float | None,
        succeeds: str | None = None,
    ) -> Claimed | None:
        """One attempt of `Catalog.get_or_extend_reservation`: another owner's unexpired
        reservation of `key` as it is ("elsewhere"), or `owner_id`'s, expiring `span` seconds
        after `now` (None: the backend's clock), written over none or an expired one
        ("acquired"), over its own ("extended") or over `succeeds`'s ("acquired": the same
        owner in an earlier ownership epoch). None when the row changed between the read and
        the write (the caller tries again). Backends may do it in one statement."""
        now = await self.now() if now is None else now
        wanted = Reservation(key, owner_id, heartbeat, now + span)
        current = await self.reservations.get(key)
        mine = (owner_id, succeeds)
        if current is not None and current.owner_id not in mine and current.expires_at > now:
            return Claimed(current, "elsewhere")
        if current is None:
            claimed = await self.reservations.create(wanted, now)
        else:
            claimed = await self.reservations.update_if_expired_or_owned(wanted, now, succeeds)
        if not claimed:
            return None
        owned = current is not None and current.owner_id == owner_id
        return Claimed(wanted, "extended" if owned else "acquired")

    async def close(self) -> None:  # noqa: B027 - most backends have nothing to release
        """Release what the backend opened itself (not a Database it was given)."""
