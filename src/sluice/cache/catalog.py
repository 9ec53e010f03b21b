"""The catalog: cache lookups and serialized reservations, as policy over a repository.

Reservations make "run once, the others wait" best effort, as in Flyte: a holder that stops
extending for `heartbeat * heartbeat_grace_period_multiplier` seconds loses the key to the
next contender. Every write is one compare-and-set in the repository; a lost race re-reads and
reports the winner, so callers only ever see the current holder.

Clock authority: with `clock=None` the repository says what time it is (the PostgreSQL
server's clock, shared by every engine of a distributed deployment; the machine's clock for
SQLite and memory). A `Clock` passed in replaces it: tests pass a FakeClock. Give a PostgreSQL
deployment `clock=None`, or engines with skewed clocks disagree about expiry.

Wake-ups: a stored entry, a released and a swept reservation call this process's subscribers
at once, and the SQL backend publishes the key on the notifier (channel "cache") in the same
transaction for the other processes. A subscriber may hear of one change more than once.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Collection
from dataclasses import replace

from prometheus_client import CollectorRegistry

from sluice.cache.backends.sql import SqlRepository
from sluice.cache.base import CACHE_CHANNEL, CatalogRepository
from sluice.cache.metrics import CacheMetrics
from sluice.cache.models import CacheEntry, EntryInfo, Reservation, ReservationInfo, require_json
from sluice.cache.sweeper import Sweeper
from sluice.clock import Clock, SystemClock
from sluice.config import CacheConfig
from sluice.errors import InvalidArgumentError, NotFoundError, StoreError
from sluice.store.database import Database
from sluice.store.notify import Notifier

log = logging.getLogger(__name__)

DEFAULT_MAX_RESERVATION_HEARTBEAT = 10.0
DEFAULT_HEARTBEAT_GRACE_PERIOD_MULTIPLIER = 3
MAX_KEY_LENGTH = 128  # the key columns in store/schema.py
MAX_OWNER_ID_LENGTH = 400
# Each lost race means another writer changed the row; after this many in a row, give up.
_CLAIM_ATTEMPTS = 5
_SHOWN_MATCHES = 10  # of an ambiguous key prefix, in its error

Callback = Callable[[str], None]


def _positive(value: float, default: float) -> float:
    return value if math.isfinite(value) and value > 0 else default


def _require_id(name: str, value: object, max_length: int) -> None:
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise InvalidArgumentError(
            f"{name} must be a non-empty str of at most {max_length} characters, got {value!r}"
        )


def _require_max_age(max_age: float | None) -> None:
    if max_age is not None and not (math.isfinite(max_age) and max_age > 0):
        raise InvalidArgumentError(f"max_age must be a positive number of seconds, got {max_age!r}")


class Catalog:
    """Cache entries and reservations of task outputs, shared by every engine on one store."""

    def __init__(
        self,
        repository: CatalogRepository,
        *,
        clock: Clock | None,
        config: CacheConfig,
        metrics: CollectorRegistry | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self._repo = repository
        self._clock = clock
        self._notifier = notifier
        self._callbacks: list[Callback] = []
        self._reads: dict[str, tuple[int, asyncio.Task[CacheEntry | None]]] = {}
        """Key -> the wake count when its in-flight entry read began, and that read."""
        self._wakes = 0
        """Wake-ups seen (any key, any process): a read begun before one may be stale."""
        self.max_heartbeat = _positive(
            config.max_reservation_heartbeat, DEFAULT_MAX_RESERVATION_HEARTBEAT
        )
        self.multiplier = int(
            _positive(
                config.heartbeat_grace_period_multiplier, DEFAULT_HEARTBEAT_GRACE_PERIOD_MULTIPLIER
            )
        )
        self.metrics = CacheMetrics(metrics)
        self._sweeper = Sweeper(self.sweep_expired, self.max_heartbeat, clock or SystemClock())

    @classmethod
    async def open(
        cls,
        db: Database,
        *,
        clock: Clock | None = None,
        config: CacheConfig,
        metrics: CollectorRegistry | None = None,
        notifier: Notifier | None = None,
    ) -> Catalog:
        """The catalog on the store's database; `notifier` carries wake-ups between processes
        (its owner starts and closes it). The database stays open when the catalog closes."""
        return cls(
            SqlRepository(db, notifier=notifier),
            clock=clock,
            config=config,
            metrics=metrics,
            notifier=notifier,
        )

    async def _now(self) -> float:
        return self._clock.now() if self._clock is not None else await self._repo.now()

    # Entries.

    async def get(
        self, key: str, *, max_age: float | None = None, fresh: bool = False
    ) -> CacheEntry | None:
        """The entry of `key`, or None (a miss) if there is none or it is older than `max_age`
        seconds (the task's CacheSpec.max_age).

        Concurrent gets of one key share one read (a herd woken by a put costs one query per
        process), as long as no wake-up arrived since that read began: a get that follows a
        wake-up never joins a read that may predate the put. `fresh` never joins a read begun
        before the call.
        """
        _require_max_age(max_age)
        entry = await self._read_entry(key, fresh)
        if (
            entry is not None
            and max_age is not None
            and entry.created_at < await self._now() - max_age
        ):
            entry = None
        (self.metrics.misses if entry is None else self.metrics.hits).inc()
        return entry

    async def _read_entry(self, key: str, fresh: bool) -> CacheEntry | None:
        shared = self._reads.get(key)
        if shared is None or fresh or shared[0] != self._wakes:
            read = asyncio.ensure_future(self._repo.entries.get(key))
            shared = (self._wakes, read)
            self._reads[key] = shared
            read.add_done_callback(lambda done: self._forget_read(key, done))
        # Shielded: a caller that is cancelled stops waiting, the others still get the answer.
        return await asyncio.shield(shared[1])

    def _forget_read(self, key: str, read: asyncio.Future[CacheEntry | None]) -> None:
        if self._reads.get(key, (0, None))[1] is read:
            del self._reads[key]
        if not read.cancelled():
            read.exception()  # retrieved, so an error nobody awaited is not logged as lost

    async def put(
        self, key: str, entry: CacheEntry, overwrite: bool = False, *, max_age: float | None = None
    ) -> bool:
        """Store `entry` under `key`, created now; True if stored, False if an entry existed.

        An existing entry is kept unless `overwrite`, or unless it is older than `max_age`
        (a stale entry is a miss to `get`, so it must not block its replacement). Outputs that
        are not JSON raise OutputsError and nothing is stored.
        """
        _require_id("key", key, MAX_KEY_LENGTH)
        _require_max_age(max_age)
        require_json(entry.outputs, entry.task_name)
        now = await self._now()
        stamped = replace(entry, created_at=now)
        if overwrite:
            stored = await self._repo.entries.replace(key, stamped)
        elif max_age is not None:
            stored = await self._repo.entries.replace(key, stamped, created_before=now - max_age)
        else:
            stored = await self._repo.entries.insert(key, stamped)
        (self.metrics.puts if stored else self.metrics.put_conflicts).inc()
        if stored:
            self._wake(key)
        return stored

    # Reservations.

    def effective_heartbeat(self, requested: float) -> float:
        """`requested` capped at the max heartbeat; a non-positive request gets the max."""
        return requested if 0 < requested < self.max_heartbeat else self.max_heartbeat

    async def get_or_extend_reservation(
        self, key: str, owner_id: str, heartbeat_interval: float, *, succeeds: str | None = None
    ) -> Reservation:
        """The current reservation of `key`: `owner_id`'s own (created, taken over after
        expiry, extended, or taken over from `succeeds`: the same owner in an earlier
        ownership epoch), or another owner's unexpired one. Compare `owner_id`."""
        _require_id("key", key, MAX_KEY_LENGTH)
        _require_id("owner_id", owner_id, MAX_OWNER_ID_LENGTH)
        heartbeat = self.effective_heartbeat(heartbeat_interval)
        now = self._clock.now() if self._clock is not None else None
        for _ in range(_CLAIM_ATTEMPTS):
            claimed = await self._repo.claim_reservation(
                key, owner_id, heartbeat, heartbeat * self.multiplier, now, succeeds
            )
            if claimed is None:
                continue
            if claimed.how == "elsewhere":
                self.metrics.reservations_held_elsewhere.inc()
            elif claimed.how == "extended":
                self.metrics.reservations_extended.inc()
            else:
                self.metrics.reservations_acquired.inc()
            return claimed.reservation
        raise StoreError(
            f"reservation of {key!r} changed hands {_CLAIM_ATTEMPTS} times while "
            "claiming it; try again"
        )

    async def release_reservation(self, key: str, owner_id: str) -> bool:
        """Delete `owner_id`'s reservation of `key` and wake its waiters. Idempotent: True if
        this call deleted it, False if `owner_id` held none (another owner's stays)."""
        released = await self._repo.reservations.delete_by_key_and_owner(key, owner_id)
        if released:
            self.metrics.reservations_released.inc()
            self._wake(key)
        return released

    async def sweep_expired(self) -> int:
        """Delete every expired reservation and wake its waiters; returns how many."""
        keys = await self._repo.reservations.delete_expired(await self._now())
        self.metrics.reservations_swept.inc(len(keys))
        for key in keys:
            self._wake(key)
        return len(keys)

    def observe_reservation_wait(self, seconds: float) -> None:
        """Record how long a task waited on another owner's reservation (engine-measured)."""
        self.metrics.reservation_wait_seconds.observe(seconds)

    # Wake-ups.

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call `callback(key)` when an entry of `key` is stored or its reservation released or
        swept, in this process or (with a notifier) another one. Returns an unsubscribe
        function. Callbacks run on the event loop: they must be quick and never block."""
        self._callbacks.append(callback)

        def from_elsewhere(key: str) -> None:
            self._wakes += 1
            callback(key)

        remote = self._notifier.subscribe(CACHE_CHANNEL, from_elsewhere) if self._notifier else None

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
            if remote is not None:
                remote()

        return unsubscribe

    def _wake(self, key: str) -> None:
        self._wakes += 1
        for callback in list(self._callbacks):
            try:
                callback(key)
            except Exception:
                log.exception("cache wake-up callback for %s failed", key)

    # What `sluice cache ls|rm` and `sluice reservations ls` show.

    async def list_entries(
        self, *, task_name: str | None = None, limit: int | None = None
    ) -> list[EntryInfo]:
        """Entries newest first, without their outputs; optionally of one task name."""
        return await self._repo.entries.list_all(task_name=task_name, limit=limit)

    async def remove_entries(
        self, keys: Collection[str] = (), *, task_name: str | None = None
    ) -> int:
        """Delete the entries in `keys` and every entry of `task_name` (in every project);
        returns how many. Naming neither is an error rather than a silent no-op."""
        if isinstance(keys, str):
            raise InvalidArgumentError(f"keys must be a collection of keys, got the str {keys!r}")
        if not keys and task_name is None:
            raise InvalidArgumentError("remove_entries needs keys or a task_name")
        return await self._repo.entries.delete(keys, task_name=task_name)

    async def resolve_keys(self, prefixes: Collection[str]) -> list[str]:
        """The full key of each of `prefixes`: a full key, or the start of exactly one (as
        `cache ls` shows keys, 16 characters). Checks them all before returning: NotFoundError
        naming those that match no entry, InvalidArgumentError listing the matches of an
        ambiguous one."""
        if isinstance(prefixes, str):
            raise InvalidArgumentError(
                f"keys must be a collection of keys, got the str {prefixes!r}"
            )
        keys = [info.key for info in await self._repo.entries.list_all()]
        resolved: list[str] = []
        missing: list[str] = []
        for prefix in prefixes:
            if not prefix:
                raise InvalidArgumentError("an empty cache key matches every entry; name one")
            matches = [prefix] if prefix in keys else [k for k in keys if k.startswith(prefix)]
            if not matches:
                missing.append(prefix)
            elif len(matches) > 1:
                shown = ", ".join(sorted(m[:16] for m in matches[:_SHOWN_MATCHES]))
                more = (
                    f" and {len(matches) - _SHOWN_MATCHES} more"
                    if len(matches) > _SHOWN_MATCHES
                    else ""
                )
                raise InvalidArgumentError(
                    f"cache key prefix {prefix!r} matches {len(matches)} entries ({shown}{more}); "
                    "give more of the key"
                )
            else:
                resolved.append(matches[0])
        if missing:
            raise NotFoundError(
                f"no cache entry has a key starting {', '.join(map(repr, missing))}"
            )
        return resolved

    async def resolve_task_name(self, name: str) -> str:
        """The task name of entries that `name` means: itself if an entry has it, else the one
        task name ending in `.name` (`train` for `quickstart.train`); a name no entry has is
        returned as given. InvalidArgumentError naming the candidates if several end so."""
        names = {info.task_name for info in await self._repo.entries.list_all()}
        if name in names:
            return name
        candidates = sorted(n for n in names if n.endswith(f".{name}"))
        if len(candidates) > 1:
            raise InvalidArgumentError(
                f"task name {name!r} is ambiguous: {', '.join(candidates)}; give the full name"
            )
        return candidates[0] if candidates else name

    async def list_reservations(self) -> list[ReservationInfo]:
        """Every reservation with the seconds until it expires (negative: expired, not swept)."""
        now = await self._now()
        return [
            ReservationInfo(r, r.expires_at - now) for r in await self._repo.reservations.list_all()
        ]

    # Lifecycle.

    async def start(self) -> None:
        """Start the sweeper of expired reservations (every max heartbeat seconds)."""
        self._sweeper.start()

    async def close(self) -> None:
        """Stop the sweeper and close what the repository opened itself."""
        await self._sweeper.stop()
        await self._repo.close()
