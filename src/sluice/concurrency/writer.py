"""Writing the controller's decisions: one transaction per batch, fenced by the leader's epoch.

Each decision is a compare-and-swap on the execution's phase (PENDING -> QUEUED only if still
PENDING, PENDING -> SKIPPED likewise, a REPLACE victim aborted only if not ended), recorded
with an event naming the controller and its epoch, and announced on the "executions"
channel. A decision whose swap lost (the execution was aborted meanwhile) is reported back so
the controller re-reads that execution.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sluice.clock import Clock
from sluice.concurrency.decide import Decisions
from sluice.concurrency.queues import Tracked
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.executions.launch import abort_in
from sluice.faults import crash_point
from sluice.spec.phases import ExecutionPhase
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.records import EventRecord
from sluice.store.store import Repos, Store

PROMOTED_REASON = "promoted by the concurrency controller"


class LostLeadership(Exception):
    """Another controller took the lead; this one must stop deciding."""


@dataclass
class WriteOutcome:
    at: float
    lost: set[str] = field(default_factory=set)  # swaps that lost: re-read these
    ended: list[Tracked] = field(default_factory=list)  # REPLACE victims ABORTED at once


class DecisionWriter:
    def __init__(
        self, store: Store, notifier: Notifier | None, clock: Clock, instance_id: str, epoch: int
    ) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock
        self.instance_id, self.epoch = instance_id, epoch

    async def write(self, decisions: Decisions) -> WriteOutcome:
        outcome = WriteOutcome(self.clock.now())
        async with self.store.write() as repos:
            repo = await self._fenced(repos, outcome.at)
            moved = await repo.promote([i.id for i in decisions.promote], outcome.at)
            crash_point("controller.mid_write")
            skipped = await self._skip(repos, repo, decisions.skip, outcome.at)
            await self._abort(repos, decisions.abort, outcome)
            await repo.set_reasons([(i.id, reason) for i, reason in decisions.wait])
            await repos.events.append(self._events(decisions, moved, skipped, outcome.at))
            await self._publish(repos, moved | skipped)
        crash_point("controller.after_commit")
        if decisions.abort:
            crash_point("controller.after_abort")
        for item, reason in decisions.wait:
            item.reason = reason
        outcome.lost |= {i.id for i in decisions.promote if i.id not in moved}
        outcome.lost |= {i.id for i, _ in decisions.skip if i.id not in skipped}
        return outcome

    async def write_reasons(self, changes: list[tuple[Tracked, str]]) -> None:
        """Rewrite waiting reasons. Not fenced: they are words, not decisions, and taking the
        leader row would make every decision wait behind them."""
        async with self.store.write() as repos:
            repo = ConcurrencyRepository(repos.conn)
            await repo.set_reasons([(item.id, reason) for item, reason in changes])
        for item, reason in changes:
            item.reason = reason

    async def _fenced(self, repos: Repos, now: float) -> ConcurrencyRepository:
        repo = ConcurrencyRepository(repos.conn)
        if not await repo.fence(self.epoch, now):
            raise LostLeadership(f"{self.instance_id} epoch {self.epoch}")
        return repo

    async def _skip(
        self,
        repos: Repos,
        repo: ConcurrencyRepository,
        skips: list[tuple[Tracked, str]],
        now: float,
    ) -> set[str]:
        done: set[str] = set()
        for item, reason in skips:
            if await repos.executions.compare_and_set_phase(
                item.id, [ExecutionPhase.PENDING], ExecutionPhase.SKIPPED, now, reason=reason
            ):
                done.add(item.id)
        await repo.skip_nodes(sorted(done), now, "execution skipped")
        return done

    async def _abort(
        self, repos: Repos, victims: list[tuple[Tracked, str]], outcome: WriteOutcome
    ) -> None:
        for victim, reason in victims:
            info = self._info("replace")
            phase = await abort_in(repos, self.notifier, outcome.at, victim.id, reason, info)
            if phase is None:
                outcome.lost.add(victim.id)
                continue
            victim.phase = phase
            if phase is ExecutionPhase.ABORTED:
                outcome.ended.append(victim)

    def _events(
        self, decisions: Decisions, moved: set[str], skipped: set[str], now: float
    ) -> list[EventRecord]:
        promote, skip, wait = self._info("promote"), self._info("skip"), self._info("wait")
        events = [
            EventRecord(
                i.id, ExecutionPhase.QUEUED.value, now, reason=PROMOTED_REASON, info=promote
            )
            for i in decisions.promote
            if i.id in moved
        ]
        events += [
            EventRecord(i.id, ExecutionPhase.SKIPPED.value, now, reason=reason, info=skip)
            for i, reason in decisions.skip
            if i.id in skipped
        ]
        events += [
            EventRecord(i.id, ExecutionPhase.PENDING.value, now, reason=reason, info=wait)
            for i, reason in decisions.wait
        ]
        return events

    async def _publish(self, repos: Repos, ids: Iterable[str]) -> None:
        if self.notifier is not None:
            await self.notifier.publish_many(repos.conn, EXECUTIONS_CHANNEL, sorted(ids))

    def _info(self, decision: str) -> dict[str, Any]:
        return {"controller": self.instance_id, "epoch": self.epoch, "decision": decision}
