"""The cache in a node's life (DESIGN.md section 6), before any slot, quota or plugin call:

lookup -> HIT: the node succeeds with the cached outputs, nothing else happens;
       -> MISS, serializable: get_or_extend_reservation with an owner id stable across
          retries -> mine: go on; someone else's: WAITING_FOR_CACHE naming the owner, woken
          by the owner's put or release (or the reservation's expiry);
while running: extend the reservation every heartbeat (a task that lost it is still driven
to its end); success: put, then release; failure, abort or timeout: release.

At most one live body per cache key while its owner lives:
- The heartbeat is armed wherever a node runs on a held reservation: when `_reserve` takes
  it, and, for a node whose record says ACQUIRED but that this engine never armed (loaded
  after a crash or a takeover), at the first heartbeat check, which extends it at once.
- Resume: an in-flight attempt whose record says ACQUIRED is re-verified (`reverify`) with
  get_or_extend_reservation before it runs on: still ours -> extended, heartbeat armed and
  scheduled; someone else's -> the handler stops the attempt (abort and finalize) and the
  node waits for the cache like any waiter (a fresh attempt start, not a user retry).
- Fencing: besides each node's own heartbeat, the engine extends every reservation its nodes
  hold in one round per heartbeat (`extend`), whatever the nodes wait for; a round that was
  answered proves them alive (the engine's fence, sluice/fencing.py), so an engine that cannot
  extend in time is fenced before a reservation can lapse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sluice.cache import CacheEntry, CacheSource, Catalog, Reservation, cache_key
from sluice.clock import Clock
from sluice.config import CacheConfig
from sluice.engine import lifecycle
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import SluiceError
from sluice.faults import crash_point
from sluice.plugins.core.phase import PhaseInfo
from sluice.spec.phases import CacheStatus, ReservationStatus

log = logging.getLogger(__name__)
WaitFor = Callable[[str, str, str, float | None], None]
"""Wake (execution id, node id) when `key` changes, or at the given time at the latest."""


class CacheGate:
    def __init__(
        self,
        catalog: Catalog,
        config: CacheConfig,
        clock: Clock,
        wait_for: WaitFor,
    ) -> None:
        self.catalog = catalog
        self.config = config
        self.clock = clock
        self._wait_for = wait_for

    @property
    def renewal(self) -> tuple[float, float]:
        """(how often, for how long) a held reservation is extended."""
        interval = self.catalog.effective_heartbeat(self.config.heartbeat_interval)
        return interval, interval * self.catalog.multiplier

    async def _claim(self, ex: ExecutionState, node: NodeState) -> tuple[Reservation, bool]:
        """get_or_extend_reservation for this node; whether it is ours. A reservation this node
        holds in an earlier ownership epoch is taken over (a takeover or a restart)."""
        owner, key = self.owner_id(ex, node), self._key(ex, node)
        heartbeat = self.config.heartbeat_interval
        held = await self.catalog.get_or_extend_reservation(key, owner, heartbeat)
        if held.owner_id != owner and self._earlier_epoch(held.owner_id, ex, node):
            held = await self.catalog.get_or_extend_reservation(
                key, owner, heartbeat, succeeds=held.owner_id
            )
        return held, held.owner_id == owner

    async def extend(self, ex: ExecutionState, node: NodeState) -> None:
        """Extend the reservation the node holds now, whatever it waits for (the engine's
        round); a loss is handled as the node's heartbeat handles it. SluiceError when the
        store cannot answer."""
        if node.record.reservation_status is not ReservationStatus.ACQUIRED:
            return
        held, mine = await self._claim(ex, node)
        if mine:
            lifecycle.arm_heartbeat(node, self.clock.now() + held.heartbeat_interval)
        else:
            self._lost(ex, node, held)

    @staticmethod
    def _lost(ex: ExecutionState, node: NodeState, held: Reservation) -> None:
        # Taken over after an expiry: keep driving this task to its end (never drop it).
        log.warning("%s/%s lost its reservation to %s", ex.id, node.id, held.owner_id)
        node.record.reservation_status = ReservationStatus.EXISTS
        lifecycle.disarm_heartbeat(node)

    @staticmethod
    def owner_id(ex: ExecutionState, node: NodeState) -> str:
        """Stable across retries of the node (a retry never waits for its own earlier attempt),
        named for the execution's ownership epoch: an earlier owner that wakes up later
        extends or releases a name nobody holds once this one took the reservation over."""
        return f"{ex.id}/{node.id}@{ex.record.owner_epoch}"

    @staticmethod
    def _earlier_epoch(owner_id: str, ex: ExecutionState, node: NodeState) -> bool:
        """`owner_id` is this node's in an earlier ownership epoch (or from before epochs)."""
        mine = f"{ex.id}/{node.id}"
        base, sep, epoch = owner_id.rpartition("@")
        if not sep:
            return owner_id == mine
        return base == mine and epoch.isdigit() and int(epoch) < ex.record.owner_epoch

    def _key(self, ex: ExecutionState, node: NodeState) -> str:
        if node.cache_key is None:
            rec = ex.record
            node.cache_key = cache_key(rec.project, rec.domain, node.task, node.record.inputs or {})
        return node.cache_key

    async def before_launch(self, ex: ExecutionState, node: NodeState) -> PhaseInfo | None:
        """None to go on; SUCCESS for a hit; WAITING_FOR_CACHE while someone else computes."""
        rec = node.record
        if ex.record.options.get("overwrite_cache"):
            rec.cache_status = CacheStatus.SKIPPED
            return None
        hit = await self._lookup(ex, node)
        if hit is not None:
            return hit
        if not node.task.metadata.cache.serialize:
            return None
        return await self._reserve(ex, node)

    async def _lookup(
        self, ex: ExecutionState, node: NodeState, *, fresh: bool = False
    ) -> PhaseInfo | None:
        rec = node.record
        try:
            entry = await self.catalog.get(
                self._key(ex, node), max_age=node.task.metadata.cache.max_age, fresh=fresh
            )
        except SluiceError as exc:
            log.warning("cache lookup of %s/%s failed: %s", ex.id, node.id, exc)
            rec.cache_status = CacheStatus.LOOKUP_FAILURE
            return None
        if entry is None:
            rec.cache_status = CacheStatus.MISS
            return None
        rec.cache_status = CacheStatus.HIT
        rec.outputs = dict(entry.outputs)
        self._waited(node)
        source = entry.source.execution_id or "an earlier run"
        return PhaseInfo.success(reason=f"cache hit: outputs computed by {source}")

    async def _reserve(self, ex: ExecutionState, node: NodeState) -> PhaseInfo | None:
        rec = node.record
        now = self.clock.now()
        try:
            held, mine = await self._claim(ex, node)
        except SluiceError as exc:
            rec.reservation_status = ReservationStatus.FAILURE
            self._wait_for(self._key(ex, node), ex.id, node.id, now + 1.0)
            return PhaseInfo.waiting_for_cache(0, f"cannot reach the reservation store: {exc}")
        if mine:
            # The previous owner may have put and released between our lookup and this claim:
            # look again (a read begun after the claim) so that the result is computed once.
            hit = await self._lookup(ex, node, fresh=True)
            if hit is not None:
                rec.reservation_status = ReservationStatus.ACQUIRED
                await self.release(ex, node)
                return hit
            rec.reservation_status = ReservationStatus.ACQUIRED
            lifecycle.arm_heartbeat(node, now + held.heartbeat_interval)
            self._waited(node)
            crash_point("engine.after_reserve")
            return None
        rec.reservation_status = ReservationStatus.EXISTS
        lifecycle.start_waiting(node, now)
        self._wait_for(self._key(ex, node), ex.id, node.id, held.expires_at)
        expires_in = max(0.0, held.expires_at - now)
        return PhaseInfo.waiting_for_cache(
            0,
            f"waiting for cache to be populated by reservation owner {held.owner} "
            f"(its reservation expires in {expires_in:.0f}s unless extended)",
        )

    def _waited(self, node: NodeState) -> None:
        waited = lifecycle.stop_waiting(node, self.clock.now())
        if waited is not None:
            self.catalog.observe_reservation_wait(waited)

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """None when the in-flight attempt may run on: it holds no reservation, or the one its
        record names is still its own (extended now, heartbeat armed); otherwise why it must
        stop. SluiceError when the reservation store cannot answer (the caller retries)."""
        rec = node.record
        if rec.reservation_status is not ReservationStatus.ACQUIRED:
            return None
        held, mine = await self._claim(ex, node)
        if mine:
            lifecycle.arm_heartbeat(node, self.clock.now() + held.heartbeat_interval)
            return None
        rec.reservation_status = ReservationStatus.EXISTS
        lifecycle.disarm_heartbeat(node)
        return f"its cache reservation was taken over by {held.owner}"

    async def heartbeat(self, ex: ExecutionState, node: NodeState) -> float | None:
        """Extend a held reservation when it is due (at once when it was never armed here);
        the time of the next heartbeat."""
        rec = node.record
        if rec.reservation_status is not ReservationStatus.ACQUIRED:
            return None
        now = self.clock.now()
        if node.heartbeat_at is not None and now < node.heartbeat_at:
            return node.heartbeat_at
        try:
            held, mine = await self._claim(ex, node)
        except SluiceError as exc:
            log.warning("extending the reservation of %s/%s failed: %s", ex.id, node.id, exc)
            return lifecycle.arm_heartbeat(node, now + 1.0)
        if not mine:
            self._lost(ex, node, held)
            return None
        return lifecycle.arm_heartbeat(node, now + held.heartbeat_interval)

    async def after_attempt(self, ex: ExecutionState, node: NodeState, succeeded: bool) -> None:
        """Put the outputs of a successful run, then release the reservation (always)."""
        rec = node.record
        if succeeded and rec.cache_status is not CacheStatus.HIT:
            await self._put(ex, node)
        if rec.reservation_status in (ReservationStatus.ACQUIRED, ReservationStatus.EXISTS):
            await self.release(ex, node)

    async def _put(self, ex: ExecutionState, node: NodeState) -> None:
        rec = node.record
        try:
            entry = CacheEntry.from_outputs(
                node.task, rec.outputs or {}, source=CacheSource(ex.id, node.id)
            )
            await self.catalog.put(
                self._key(ex, node),
                entry,
                overwrite=bool(ex.record.options.get("overwrite_cache")),
                max_age=node.task.metadata.cache.max_age,
            )
            rec.cache_status = CacheStatus.POPULATED
            crash_point("engine.after_put")
        except SluiceError as exc:
            log.warning("caching the outputs of %s/%s failed: %s", ex.id, node.id, exc)
            rec.cache_status = CacheStatus.PUT_FAILURE

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        rec = node.record
        if rec.reservation_status not in (ReservationStatus.ACQUIRED, ReservationStatus.EXISTS):
            return
        crash_point("engine.before_reservation_release")
        try:
            await self.catalog.release_reservation(self._key(ex, node), self.owner_id(ex, node))
            rec.reservation_status = ReservationStatus.RELEASED
        except SluiceError as exc:
            log.warning("releasing the reservation of %s/%s failed: %s", ex.id, node.id, exc)
        lifecycle.disarm_heartbeat(node)


class NoCache:
    """The cache gate of an engine without a catalog: every node computes, nothing is kept."""

    async def before_launch(self, ex: ExecutionState, node: NodeState) -> PhaseInfo | None:
        return None

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        return None

    async def heartbeat(self, ex: ExecutionState, node: NodeState) -> float | None:
        return None

    @property
    def renewal(self) -> tuple[float, float] | None:
        return None

    async def extend(self, ex: ExecutionState, node: NodeState) -> None:
        return None

    async def after_attempt(self, ex: ExecutionState, node: NodeState, succeeded: bool) -> None:
        return None

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        return None


NO_CACHE = NoCache()
