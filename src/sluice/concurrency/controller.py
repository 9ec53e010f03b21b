"""The concurrency controller: decides when PENDING executions become QUEUED.

Every process that may need decisions runs a candidate (`run()`); the one holding the leader
lock leads, the others stand by and retry the lock every `standby_interval`. A leader bumps
the fencing epoch, stores the config caps, rebuilds its memory from the store, then wakes on
"executions" notifications (a new PENDING, an execution ended), decides in memory
(decide.py) and writes each batch of decisions in one transaction of compare-and-swaps that
also checks its epoch. A full rescan every `rescan_interval` is only a safety net. A crash at
any step leaves the store consistent: the next leader re-reads it and decides again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sluice.cancellation import reraise_cancellation, wait_event
from sluice.clock import Clock
from sluice.concurrency.caps import CapsService
from sluice.concurrency.decide import Caps, Decisions, decide, wait_reason
from sluice.concurrency.leader import LeaderLock
from sluice.concurrency.metrics import ControllerMetrics
from sluice.concurrency.queues import ControllerState, QueueKey, Tracked
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.concurrency.writer import DecisionWriter, LostLeadership
from sluice.config import ConcurrencyConfig
from sluice.executions.policies import CAPS_CHANNEL, LAUNCH_PLANS_CHANNEL, PolicyTable
from sluice.faults import crash_point
from sluice.store.notify import EXECUTIONS_CHANNEL, WAKE_ALL, Notifier
from sluice.store.repositories import CapsRepository
from sluice.store.store import Store

log = logging.getLogger(__name__)


@dataclass
class ControllerOptions:
    rescan_interval: float = 10.0
    """Seconds between safety-net rebuilds from the store; notifications drive decisions."""
    standby_interval: float = 1.0
    """Seconds between a standby's attempts to take the leader lock."""
    reason_interval: float = 1.0
    """Seconds between rewrites of the queue positions in PENDING executions' reasons."""


class ConcurrencyController:
    def __init__(
        self,
        store: Store,
        notifier: Notifier | None,
        clock: Clock,
        *,
        lock: LeaderLock,
        config: ConcurrencyConfig,
        instance_id: str,
        options: ControllerOptions | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock
        self.lock, self.config, self.instance_id = lock, config, instance_id
        self.options = options or ControllerOptions()
        self.metrics = metrics
        self.state = ControllerState()
        self.policies = PolicyTable()
        self.caps = Caps()
        self.leading = asyncio.Event()
        self.latencies: deque[float] = deque(maxlen=100_000)
        self._writer: DecisionWriter | None = None
        self._changed: set[str] = set()
        self._rules_stale = True  # policies and caps to re-read before the next decision
        self._reason_keys: set[QueueKey] = set()
        self._wake = asyncio.Event()
        self._rescan_now = False

    # Candidate.
    async def run(self) -> None:
        """Stand by and lead whenever the lock is free, until cancelled."""
        unsubscribe = self._subscribe()
        try:
            while True:
                if await self._try_lock():
                    await self._lead_until_lost()
                reraise_cancellation()
                await asyncio.sleep(self.options.standby_interval)
        finally:
            for stop in unsubscribe:
                stop()
            await self.lock.release()

    async def _try_lock(self) -> bool:
        try:
            return await self.lock.try_acquire()
        except Exception:
            reraise_cancellation()
            log.warning("controller %s cannot reach its leader lock", self.instance_id)
            return False

    async def _lead_until_lost(self) -> None:
        try:
            await self.start_term()
            await self._lead()
        except LostLeadership:
            log.warning("controller %s lost the lead", self.instance_id)
        except Exception:
            reraise_cancellation()
            log.exception("controller %s failed; standing by", self.instance_id)
        finally:
            self.leading.clear()
            self._set_leader_gauge(0)
            await self.lock.release()

    def _subscribe(self) -> list[Callable[[], None]]:
        if self.notifier is None:
            return []
        return [
            self.notifier.subscribe(EXECUTIONS_CHANNEL, self._on_execution),
            self.notifier.subscribe(LAUNCH_PLANS_CHANNEL, self._on_rules),
            self.notifier.subscribe(CAPS_CHANNEL, self._on_rules),
        ]

    def _on_execution(self, execution_id: str) -> None:
        if not self.leading.is_set():
            return
        if execution_id == WAKE_ALL:  # notifications may have been lost: re-read everything
            self._rescan_now = True
        else:
            self._changed.add(execution_id)
        self._wake.set()

    def _on_rules(self, _: str) -> None:
        self._rules_stale = True
        self._wake.set()

    # Leader.
    async def start_term(self) -> None:
        """Take the lead: a new epoch, the config caps stored, memory rebuilt."""
        async with self.store.write() as repos:
            epoch = await ConcurrencyRepository(repos.conn).take_lead(
                self.instance_id, self.clock.now()
            )
        self._writer = DecisionWriter(
            self.store, self.notifier, self.clock, self.instance_id, epoch
        )
        await CapsService(self.store, self.notifier, self.clock).sync_config(self.config)
        self.leading.set()
        self._set_leader_gauge(1)
        await self.rebuild()
        log.info("controller %s leads (epoch %d)", self.instance_id, epoch)

    async def _lead(self) -> None:
        reasons = asyncio.create_task(self._refresh_reasons(), name="sluice-controller-reasons")
        try:
            await self._decide_until_lost()
        finally:
            reasons.cancel()
            await asyncio.gather(reasons, return_exceptions=True)

    async def _decide_until_lost(self) -> None:
        loop = asyncio.get_running_loop()
        rescan_at = loop.time() + self.options.rescan_interval
        check_at = loop.time()
        while True:
            await self.step()
            now = loop.time()
            if now >= check_at:
                if not await self.lock.still_held():
                    raise LostLeadership(self.instance_id)
                check_at = now + self.options.standby_interval
            if now >= rescan_at or self._rescan_now:
                await self.rebuild()
                rescan_at = now + self.options.rescan_interval
            await self._sleep(min(rescan_at, check_at) - loop.time())

    async def _refresh_reasons(self) -> None:
        """Keep PENDING reasons current, beside the decisions rather than in their way."""
        while True:
            await asyncio.sleep(self.options.reason_interval)
            try:
                current = False
                while not current:  # a chunk per transaction: decisions slip in between
                    current = await self.write_reasons()
            except Exception:
                reraise_cancellation()
                log.warning("rewriting waiting reasons failed; retrying", exc_info=True)

    async def _sleep(self, seconds: float) -> None:
        await wait_event(self._wake, seconds)
        self._wake.clear()

    async def rebuild(self) -> None:
        """Replace memory with what the store holds now; every queue is then reconsidered.
        Notifications are heard from before the read begins, so nothing falls between."""
        self._changed.clear()
        self._rescan_now = False
        self._rules_stale = True
        async with self.store.read() as repos:
            rows = await ConcurrencyRepository(repos.conn).non_terminal()
        state = ControllerState()
        for item, ended_at in rows:
            state.observe(self._grouped(item), ended_at)
        state.mark_all_dirty()
        state.carry_turns(self.state)
        self.state = state
        await self._absorb()
        crash_point("controller.after_rebuild")

    async def step(self) -> None:
        """Absorb what changed, then decide and write until nothing is left to decide."""
        await self._absorb()
        while True:
            decisions = decide(self.state, self.policies, self.caps)
            self._reason_keys |= decisions.touched
            if not decisions:
                return
            crash_point("controller.after_decision")
            await self._write(decisions)
            await self._absorb()

    async def _absorb(self) -> None:
        if self._rules_stale:
            await self._load_rules()
        ids, self._changed = self._changed, set()
        if not ids:
            return
        async with self.store.read() as repos:
            repo = ConcurrencyRepository(repos.conn)
            rows = await repo.by_ids(ids)
            # A notification can be lost (a subscriber not listening yet); so that a newcomer
            # never overtakes an older execution nobody announced, read its whole queue.
            arrivals = {
                i.key for i, _ in rows if i.stage == 0 and i.id not in self.state.executions
            }
            for key in arrivals:
                rows += await repo.pending_of(key)
        for item, ended_at in rows:
            self.state.observe(self._grouped(item), ended_at)
        if not all(self.policies.knows(item) for item, _ in rows):
            await self._load_rules()  # a launch plan notification has not arrived yet

    async def _load_rules(self) -> None:
        self._rules_stale = False
        async with self.store.read() as repos:
            records = await repos.launch_plans.find()
            caps = await CapsRepository(repos.conn).effective()
        self.policies = PolicyTable(records)
        self.caps = Caps(caps)
        self._regroup()
        self.state.capped_projects = {project for project, _ in caps}
        self.state.shared_plans = self.policies.with_total_max()
        self.state.mark_all_dirty()

    def _group_of(self, item: Tracked) -> str:
        """The key `item` is queued under: its stored key while its policy is keyed."""
        if not item.concurrency_key:
            return ""
        policy = self.policies.policy(item)
        return item.concurrency_key if policy is not None and policy.key is not None else ""

    def _grouped(self, item: Tracked) -> Tracked:
        item.group = self._group_of(item)
        return item

    def _regroup(self) -> None:
        """After the policies change, executions whose queue changed (a keyed policy became
        ACTIVE, or an unkeyed one) are queued again: memory is rebuilt from itself."""
        items = list(self.state.executions.values())
        if all(self._group_of(item) == item.group for item in items):
            return
        state = ControllerState()
        for item in items:
            state.observe(self._grouped(item))
        state.carry_turns(self.state)
        self.state = state

    async def _write(self, decisions: Decisions) -> None:
        """Write a batch; if that fails, memory is ahead of the store, so the error ends this
        term and the next one rebuilds from the store (after `standby_interval`)."""
        assert self._writer is not None
        outcome = await self._writer.write(decisions)
        self._changed |= outcome.lost
        for victim in outcome.ended:
            self.state.end(victim, victim.phase, outcome.at)
        self._measure(decisions, outcome.at)

    def _measure(self, decisions: Decisions, committed_at: float) -> None:
        for item in decisions.promote:
            queue = self.state.queues.get(item.queue_key)
            if queue is not None and queue.freed_at:
                self.latencies.append(committed_at - queue.freed_at.popleft())
                if self.metrics is not None:
                    self.metrics.promotion_latency.observe(self.latencies[-1])
        if self.metrics is not None:
            for kind in ("promote", "skip", "abort", "wait"):
                self.metrics.decisions.labels(kind).inc(len(getattr(decisions, kind)))
            self.metrics.pending.set(self.state.pending_count)
            self.metrics.active.set(len(self.state.executions) - self.state.pending_count)

    async def write_reasons(self, limit: int = 100) -> bool:
        """Rewrite the reasons of PENDING executions whose queue moved (positions, holders),
        at most about `limit` per call so that decisions never wait long behind them; True
        when every reason is current."""
        changes: list[tuple[Tracked, str]] = []
        while self._reason_keys and len(changes) < limit:
            queue = self.state.queues.get(self._reason_keys.pop())
            if queue is None:
                continue
            for position, item in enumerate(queue.in_order(), 1):
                reason = wait_reason(self.state, queue, item, position, self.policies, self.caps)
                if reason != item.reason:
                    changes.append((item, reason))
        if changes and self._writer is not None:
            await self._writer.write_reasons(changes)
        return not self._reason_keys

    def _set_leader_gauge(self, value: int) -> None:
        if self.metrics is not None:
            self.metrics.leader.set(value)
