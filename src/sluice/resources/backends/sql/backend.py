"""The SQL backend: SQLite (the embedded default, the store's own file) and PostgreSQL.

Every operation is one transaction. The hot ones (allocate, release, renew) take the store's
direct driver paths: on SQLite one BEGIN IMMEDIATE transaction of plain statements on the
event loop's thread (`lite.py`, store/direct.py), which serialises all writers of the file
across processes; on PostgreSQL one pipelined transaction of server-function calls, which
take transaction advisory locks on the namespaces involved in one global order
(`pg_direct.py`, store/pgdirect.py). Sweeps, quota changes and snapshots go through the
store's SQLAlchemy `Database`. Inside a transaction the admission rule runs in Python on rows
read in that same transaction. An uncontended allocation or release (nobody waits in its
namespaces, no lease lapsed there, the claim fits) first takes a fast path that needs no rule
data structures: three statements in the same SQLite transaction (`lite_fast.py`), one
autocommit call of a migration-0005 function on PostgreSQL (one round trip, one commit);
anything else falls through to the general path with nothing written. Wake-ups go through
the store's Notifier (LISTEN/NOTIFY on PostgreSQL, a notification row and a local datagram on
SQLite), published inside the transaction so no process wakes before the change is visible;
they name the waiters that would now be granted, so only their processes ask again.

One shortcut: a waiter asking again on its own (not named ready by a wake-up) is answered
from a plain read when that read shows it still refused and nothing to change, so that
waiters polling on a timer never queue for the write lock. Any grant is decided in the write
transaction.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.errors import BackendUnavailableError, StoreUnavailableError
from sluice.resources.admission import plan_allocation
from sluice.resources.backends._shared import resolve_quota, usage_after
from sluice.resources.backends.base import (
    WAKE_CHANNEL,
    AllocationOutcome,
    AllocationRequest,
    NamespaceUsage,
    ResourceBackend,
    TimedRequest,
    WakeCallback,
    host_now,
)
from sluice.resources.backends.sql import lite, lite_fast, pg_direct, preempt, reads, writes
from sluice.resources.backends.sql.reads import Loaded
from sluice.resources.models import (
    AllocationResult,
    AllocationStatus,
    NamespaceSnapshot,
    QuotaSource,
    Victim,
)
from sluice.store.database import Database
from sluice.store.direct import SqliteDirect
from sluice.store.notify import Notifier
from sluice.store.pgdirect import PgDirect
from sluice.store.servertime import read_now

log = logging.getLogger(__name__)
_GRANTED = AllocationResult(AllocationStatus.GRANTED)
_QUEUED_KEPT = 4096


@contextlib.contextmanager
def _unavailable_as_backend_error() -> Iterator[None]:
    """The store's database already translates driver errors; an unreachable one is, for the
    resource manager, an unavailable backend like an unreachable Redis."""
    try:
        yield
    except StoreUnavailableError as exc:
        raise BackendUnavailableError(str(exc)) from exc


class SqlBackend(ResourceBackend):
    """Resource bookkeeping in the store's tables (`sqlite:///…`, `postgresql://…`).

    Give `db` (and the store's `notifier`) to share the store's database, or `url` to open a
    database (and a notifier) of its own. Open this backend before the store's notifier
    starts: a started PostgreSQL notifier LISTENs on a new channel only at its next turn.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        db: Database | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        if (url is None) == (db is None):
            raise ValueError("SqlBackend needs exactly one of url and db")
        self._url, self._db, self._notifier = url, db, notifier
        self._owns_db, self._owns_notifier = db is None, notifier is None
        self._origin = uuid.uuid4().hex
        self._callbacks: list[WakeCallback] = []
        self._unsubscribe: Callable[[], None] | None = None
        # PostgreSQL: namespaces whose last answer here showed waiters, where a release goes
        # straight to the general path (the one-call release would only decline). A hint:
        # either path is correct; a wrong guess costs one round trip.
        self._queued: set[str] = set()

    async def open(self) -> None:
        if self._db is None:
            assert self._url is not None
            self._db = await Database.open(self._url)
        if self._notifier is None:
            self._notifier = Notifier(self._db, origin=f"resources-{self._origin}")
        # Before start(): a PostgreSQL notifier LISTENs at once only on channels it knows.
        self._unsubscribe = self._notifier.subscribe(WAKE_CHANNEL, self._on_notice)
        if self._owns_notifier:
            await self._notifier.start()

    async def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._owns_notifier and self._notifier is not None:
            await self._notifier.close()
            self._notifier = None
        if self._owns_db and self._db is not None:
            await self._db.close()
            self._db = None

    @contextlib.asynccontextmanager
    async def _transaction(self, namespaces: Sequence[str]) -> AsyncIterator[AsyncConnection]:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        with _unavailable_as_backend_error():
            async with self._db.begin() as conn:
                await writes.lock_namespaces(conn, namespaces)
                yield conn

    @property
    def _direct(self) -> SqliteDirect | None:
        """SQLite: the store's direct sqlite3 path, which the hot paths take (lite.py)."""
        if self._db is None or self._db.dialect != "sqlite":
            return None
        return self._db.direct()

    def _pg(self) -> PgDirect:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        return self._db.pg_direct()

    async def allocate(self, request: AllocationRequest) -> AllocationOutcome:
        direct = self._direct
        if direct is not None:
            return await self._allocate_direct(direct, request)
        outcome = await self._allocate_pg(request)
        self._note_queues(outcome.usage)
        return outcome

    async def _allocate_direct(
        self, direct: SqliteDirect, request: AllocationRequest
    ) -> AllocationOutcome:
        with _unavailable_as_backend_error():
            if request.asked_before:
                timed = request.at(host_now(request.now))
                loaded = await direct.read(lambda cur: lite.read_for_refusal(cur, timed))
                refusal = self._refusal_from(timed, loaded)
                if refusal is not None:
                    return refusal

            def work(cur: sqlite3.Cursor) -> lite.Allocated | tuple[NamespaceUsage, ...]:
                timed = request.at(host_now(request.now))  # the host's clock, inside the lock
                granted = lite_fast.grant(cur, timed)
                if granted is not None:
                    return granted
                done = lite.allocate(cur, timed)
                self._publish_direct(cur, [(ns, None) for ns in sorted(done.reclaimed)])
                return done

            done = await direct.write(work)
        if isinstance(done, tuple):
            return AllocationOutcome(_GRANTED, None, done)
        return self._outcome(request, done)

    async def _allocate_pg(self, request: AllocationRequest) -> AllocationOutcome:
        if request.asked_before:
            refusal = await self._refusal_without_writes(request)
            if refusal is not None:
                return refusal
        with _unavailable_as_backend_error():
            async with self._pg().connection() as conn:
                if request.waiting:  # it has waiter entries, which try_grant declines on
                    found = await pg_direct.try_grant_waiter(conn, request)
                    if found is not None:
                        since, usage, now = found
                        fast = AllocationOutcome(_GRANTED, since, usage, judged_at=now)
                    else:
                        fast = None
                else:
                    granted = await pg_direct.try_grant(conn, request)
                    fast = None if granted is None else AllocationOutcome(_GRANTED, None, granted)
        if fast is not None:
            return fast
        with _unavailable_as_backend_error():
            # The server functions lock the namespaces themselves, in one global order.
            async with self._pg().transaction() as conn:
                done = await pg_direct.allocate(conn, request)
                await self._notify_pg(conn, [(ns, None) for ns in sorted(done.reclaimed)])
        return self._outcome(request, done)

    @staticmethod
    def _outcome(request: AllocationRequest, done: lite.Allocated) -> AllocationOutcome:
        request = done.request
        plan, states = done.plan, done.states
        waited = plan.waited_since if plan.granted else None
        usage = usage_after(request, plan, states)
        reclaimed = tuple(sorted(done.reclaimed))
        return AllocationOutcome(plan.result, waited, usage, reclaimed, request.now)

    async def _notify_pg(
        self, conn: Any, wake: Sequence[tuple[str, tuple[str, ...] | None]]
    ) -> None:
        if wake and self._notifier is not None:
            payload = json.dumps({"origin": self._origin, "wake": list(wake)})
            await pg_direct.notify(conn, WAKE_CHANNEL, payload)

    def _publish_direct(
        self, cur: sqlite3.Cursor, wake: Sequence[tuple[str, tuple[str, ...] | None]]
    ) -> None:
        if wake and self._notifier is not None:
            payload = json.dumps({"origin": self._origin, "wake": list(wake)})
            self._notifier.publish_direct(cur, WAKE_CHANNEL, payload)

    async def _refusal_without_writes(self, request: AllocationRequest) -> AllocationOutcome | None:
        """A waiter asking again on its own (not named ready by a wake-up), with nothing to
        reclaim, renew or record, is refused from a plain read, without the write lock. Any
        other case, a grant included, returns None and goes through the write transaction,
        which judges again. A stale read can only delay a waiter until its next ask."""
        names = [c.namespace for c in request.claims]
        found = await self._read_for_refusal(request, names)
        return None if found is None else self._refusal_from(found[0], found[1])

    @staticmethod
    def _refusal_from(request: TimedRequest, loaded: Loaded | None) -> AllocationOutcome | None:
        if loaded is None:
            return None
        states = loaded.states
        if loaded.lapsed_waiters or any(state.holding for state in states.values()):
            return None
        plan = plan_allocation(request.token, request.claims, request.holder, request.now, states)
        if plan.granted or writes.waiters_to_write(request, plan, loaded):
            return None
        return AllocationOutcome(plan.result, None, usage_after(request, plan, states))

    async def _read_for_refusal(
        self, request: AllocationRequest, names: Sequence[str]
    ) -> tuple[TimedRequest, Loaded | None] | None:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        with _unavailable_as_backend_error():
            async with self._db.read() as conn:
                timed = request.at(await read_now(conn, request.now))
                sources = await reads.load_sources(conn, names)
                quotas = {
                    c.namespace: resolve_quota(c, sources.get(c.namespace, {}))
                    for c in request.claims
                }
                if writes.defaults_to_store(request, sources):
                    return None
                if await reads.any_lapsed(conn, names, timed.now):
                    return None
                return timed, await reads.load_states(conn, quotas, request.token, timed.now)

    async def release(
        self, token: str, namespaces: Sequence[str], now: float | None
    ) -> tuple[NamespaceUsage, ...]:
        names = list(dict.fromkeys(namespaces))
        direct = self._direct
        if direct is not None:

            def work(cur: sqlite3.Cursor) -> tuple[NamespaceUsage, ...]:
                usage = lite_fast.release(cur, token, names, host_now(now))
                self._publish_direct(cur, [(u.namespace, u.ready) for u in usage])
                return usage

            with _unavailable_as_backend_error():
                return await direct.write(work)
        usage = await self._release_pg(token, names, now)
        self._note_queues(usage)
        return usage

    async def _release_pg(
        self, token: str, names: Sequence[str], now: float | None
    ) -> tuple[NamespaceUsage, ...]:
        origin = self._origin if self._notifier is not None else None
        with _unavailable_as_backend_error():
            if self._queued.isdisjoint(names):
                async with self._pg().connection() as conn:
                    freed = await pg_direct.try_release(conn, token, names, WAKE_CHANNEL, origin)
                if freed is not None:
                    return freed
            async with self._pg().transaction() as conn:
                usage = await pg_direct.release(conn, token, names, now)
                await self._notify_pg(conn, [(u.namespace, u.ready) for u in usage])
        return usage

    def _note_queues(self, usage: Sequence[NamespaceUsage]) -> None:
        if len(self._queued) > _QUEUED_KEPT:
            self._queued.clear()  # a hint only: never let thousands of lock names pile up
        for entry in usage:
            if entry.waiters:
                self._queued.add(entry.namespace)
            else:
                self._queued.discard(entry.namespace)

    async def _after_change(
        self, conn: AsyncConnection, changed: Sequence[str], now: float
    ) -> tuple[NamespaceUsage, ...]:
        if not changed:
            return ()
        usage = await reads.usage_with_ready(conn, changed, now)
        idle = [u.namespace for u in usage if u.in_use == 0 and u.waiters == 0]
        if idle:
            await writes.forget_empty(conn, idle)
        await self._publish(conn, [(u.namespace, u.ready) for u in usage])
        return usage

    async def renew(
        self, token: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        # Single-row updates guarded by `expiry > now` need no namespace lock: a concurrent
        # reclaim re-checks the same condition and skips a lease renewed before it.
        direct = self._direct
        if direct is not None:
            names = list(namespaces)
            with _unavailable_as_backend_error():
                held = await direct.write(
                    lambda cur: lite.extend_leases(cur, token, names, host_now(now), lease)
                )
            return frozenset(held)
        with _unavailable_as_backend_error():
            async with self._pg().transaction() as conn:
                held = await pg_direct.extend_leases(conn, token, list(namespaces), now, lease)
        return frozenset(held)

    async def transfer(
        self, old: str, new: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        names = list(namespaces)
        direct = self._direct
        with _unavailable_as_backend_error():
            if direct is not None:
                moved = await direct.write(
                    lambda cur: lite.transfer(cur, old, new, names, host_now(now), lease)
                )
            else:
                async with self._pg().transaction() as conn:
                    moved = await pg_direct.transfer(conn, old, new, names, now, lease)
        return frozenset(moved)

    async def sweep(self, now: float | None) -> tuple[NamespaceUsage, ...]:
        async with self._transaction(()) as conn:
            now = await read_now(conn, now)
            candidates = sorted(await reads.lapsed_namespaces(conn, now))
            if not candidates:
                return ()
            await writes.lock_namespaces(conn, candidates)
            changed = sorted(await writes.reclaim(conn, candidates, now))
            await preempt.forget_orphans(conn)
            return await self._after_change(conn, changed, now)

    async def set_quotas(
        self, source: QuotaSource, quotas: Mapping[str, int | None], now: float | None
    ) -> None:
        async with self._transaction(list(quotas)) as conn:
            now = await read_now(conn, now)
            stored = await reads.load_sources(conn, list(quotas))
            changed = {ns: q for ns, q in quotas.items() if stored.get(ns, {}).get(source) != q}
            await writes.store_quotas(conn, source, changed, now)
            await writes.forget_empty(conn, list(changed))
            await self._publish(conn, [(ns, None) for ns in changed])

    async def snapshot(self, namespace: str | None, now: float | None) -> list[NamespaceSnapshot]:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        with _unavailable_as_backend_error():
            async with self._db.read() as conn:
                now = await read_now(conn, now)
                return await reads.read_snapshot(conn, namespace, now)

    # Preemption (sql/preempt.py): not a hot path, so one SQLAlchemy transaction each.
    supports_preemption = True

    async def preempt(
        self, request: AllocationRequest, namespaces: Sequence[str]
    ) -> tuple[Victim, ...]:
        async with self._transaction([c.namespace for c in request.claims]) as conn:
            timed = request.at(await read_now(conn, request.now))
            return await preempt.mark_victims(conn, timed, namespaces)

    async def record_priority(self, token: str, namespaces: Sequence[str], priority: int) -> None:
        async with self._transaction(namespaces) as conn:
            await preempt.record_priority(conn, token, namespaces, priority)

    async def preempted(self, token: str, namespaces: Sequence[str]) -> tuple[Victim, ...]:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        with _unavailable_as_backend_error():
            async with self._db.read() as conn:
                return await preempt.marks_on(conn, token, namespaces)

    async def set_preempt(self, namespace: str, on: bool) -> None:
        async with self._transaction([namespace]) as conn:
            await preempt.set_flag(conn, namespace, on)

    async def preempt_namespaces(self) -> frozenset[str]:
        if self._db is None:
            raise RuntimeError("SqlBackend used before open()")
        with _unavailable_as_backend_error():
            async with self._db.read() as conn:
                return await preempt.flags(conn)

    async def _publish(
        self, conn: AsyncConnection, wake: Sequence[tuple[str, tuple[str, ...] | None]]
    ) -> None:
        if wake and self._notifier is not None:
            payload = json.dumps({"origin": self._origin, "wake": list(wake)})
            await self._notifier.publish(conn, WAKE_CHANNEL, payload)

    def _on_notice(self, payload: str) -> None:
        try:
            notice = json.loads(payload)
        except ValueError:
            log.warning("ignoring malformed resource wake-up %r", payload)
            return
        if notice.get("origin") == self._origin:
            return
        for namespace, ready in notice.get("wake", ()):
            for callback in list(self._callbacks):
                callback(namespace, None if ready is None else tuple(ready))

    def listen(self, callback: WakeCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return stop
