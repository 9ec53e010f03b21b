"""Quotas and locks a task claims before it runs (DESIGN.md sections 5 and 8).

A task declares quotas (`Quota("warehouse", units=2)`) and locks whose names are computed
from its inputs when its node starts (`"db/partition/{p}"`, once per item of a list input
with `for_each`, or a module-level function). Locks are resource namespaces `lock:<name>`
created on the fly, with a capacity from the first matching `resources.lock_rules` glob (1
when none matches). Everything is claimed through the resource manager in ONE all-or-nothing
allocation, after the task has a parallelism slot and before its plugin runs: no hold-and-wait,
so no deadlock. The leases are renewed while the task lives and released in finalize.

Rules:
- An attempt holds exactly what the resource store says it holds. An in-flight attempt that
  an engine loads (resumed after a crash or a takeover) is re-verified before it runs on
  (`reverify`): its claims are allocated again (idempotent: GRANTED while held, and a lapsed
  lease nobody took is granted again) and its plugin's tokens renewed. Anything no longer
  held stops the attempt (the handler aborts and finalizes it and puts the node back to
  waiting for its claims, a fresh attempt start that is not a user retry).
- `renew` returns what no longer holds; the engine then re-verifies the attempt the same way
  instead of letting it run on a token someone else may have been granted.
- Aborting, failing or finishing withdraws every waiter entry the node has in the manager
  (its claim's token, and the plugin's refused tokens), not only the tokens it holds.
- Fencing: every token is named for the execution's ownership epoch ("...@<epoch>"). An owner
  that finds tokens of an earlier epoch in the node's record (a takeover, a restart) takes
  them over (`QuotaManager.transfer`, keeping the room) before anything else, and gives back
  what could not be taken over; an earlier owner that wakes up later renews or releases names
  nobody holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sluice.clock import Clock
from sluice.engine.holdings import NodeHoldings, held_tokens
from sluice.engine.state import ExecutionState, NodeState, node_holder
from sluice.errors import DefinitionError, InputError, NotFoundError, SluiceError
from sluice.faults import crash_point
from sluice.locks.names import lock_names
from sluice.plugins.core.phase import PhaseInfo
from sluice.resources import (
    Claim,
    Holder,
    QuotaManager,
    compose_token,
    with_epoch,
)
from sluice.resources.models import Victim
from sluice.spec.names import LOCK_PREFIX
from sluice.store.records import EventRecord

WaitOn = Callable[[Sequence[str], str, str, str | None], None]
"""Re-evaluate (execution id, node id) when room may appear in one of these namespaces."""


class ClaimsGate:
    """Claims a node's quotas and locks in one allocation, and gives them back."""

    def __init__(
        self, manager: QuotaManager, capacity: Callable[[str], int], wait_on: WaitOn, clock: Clock
    ) -> None:
        self.clock = clock
        self.manager = manager
        self.capacity = capacity
        self._wait_on = wait_on
        self._announced: set[tuple[str, str, str]] = set()
        """(preempter token, namespace, victim token) already recorded as PREEMPTING."""

    @staticmethod
    def token(ex: ExecutionState, node: NodeState) -> str:
        """Stable for the node within an ownership epoch, so a retry re-claims idempotently;
        composed as every stored token is (`compose_token`), so two tasks never share one."""
        return with_epoch(compose_token(node_holder(ex, node), node.id), ex.record.owner_epoch)

    async def adopt(self, ex: ExecutionState, node: NodeState) -> None:
        """Take over the tokens an earlier ownership epoch recorded for this node (their
        grants keep their room under this epoch's names); give back what lapsed meanwhile.
        SluiceError when the manager cannot answer (nothing is forgotten then)."""
        epoch = ex.record.owner_epoch
        holdings = NodeHoldings(ex, node)
        stored = holdings.stored
        old = stored.get("token")
        if old and old != self.token(ex, node):
            namespaces = list(stored.get("namespaces", []))
            moved = await self.manager.transfer(old, self.token(ex, node), namespaces)
            await self._give_back(old, [ns for ns in namespaces if ns not in moved])
            holdings.claim_granted(self.token(ex, node), [ns for ns in namespaces if ns in moved])
        for namespace, token in list(stored.get("plugin_tokens", [])):
            new = with_epoch(token, epoch)
            if new == token:
                continue
            moved = await self.manager.transfer(token, new, [namespace])
            holdings.plugin_released(namespace, token)
            if moved:
                holdings.plugin_held(namespace, new)
            else:
                await self._give_back(token, [namespace])

    async def _give_back(self, token: str, namespaces: list[str]) -> None:
        if namespaces:
            await self.manager.release(token, namespaces)

    def holder(self, ex: ExecutionState, node: NodeState) -> Holder:
        return node_holder(ex, node, node.task.metadata.priority)

    def claims(self, node: NodeState) -> list[Claim]:
        quotas = [Claim(q.namespace, q.units) for q in node.task.claims.quotas]
        locks = [
            Claim(LOCK_PREFIX + name, 1, default_quota=self.capacity(name))
            for name in sorted(node.lock_names or ())
        ]
        return quotas + locks

    async def acquire(
        self, ex: ExecutionState, node: NodeState
    ) -> tuple[PhaseInfo | None, str | None]:
        """(None, None) when the node holds everything it claims (or claims nothing);
        otherwise a waiting or permanent-failure PhaseInfo and the lock that blocks, if a
        lock blocks."""
        claims = self.claims(node)
        if not claims:
            return None, None
        try:
            await self.adopt(ex, node)
            result = await self.manager.allocate(
                self.token(ex, node), claims, self.holder(ex, node)
            )
        except (InputError, NotFoundError, DefinitionError) as exc:
            return PhaseInfo.permanent_failure("BadClaim", str(exc)), None
        except SluiceError as exc:
            self._wait_on([c.namespace for c in claims], ex.id, node.id, None)
            return PhaseInfo.waiting_for_resources(0, f"resource manager unavailable: {exc}"), None
        if result.granted:
            namespaces = [c.namespace for c in claims]
            stopped = await self._preempted_before_launch(ex, node, namespaces)
            if stopped is not None:
                return stopped, None
            NodeHoldings(ex, node).claim_granted(self.token(ex, node), namespaces)
            self._event(ex, node, "GRANTED", namespaces)
            crash_point("engine.after_claim")
            return None, None
        self._announce_preempting(ex, node, result.preempting)
        info = PhaseInfo.waiting_for_resources(0, result.reason())
        busy_lock = self.blocking_lock(result.namespace)
        if busy_lock is not None:
            # This engine's scheduler now orders the wait for that lock and asks again when it
            # is freed. Stop waiting in the manager's queues meanwhile: a waiter that does not
            # keep asking would reserve its other namespaces against engines that could use
            # them, and waiters of two engines could reserve locks for each other.
            await self._withdraw(ex, node, [c.namespace for c in claims])
        self._wait_on([c.namespace for c in claims], ex.id, node.id, self.token(ex, node))
        return info, busy_lock

    async def _preempted_before_launch(
        self, ex: ExecutionState, node: NodeState, namespaces: list[str]
    ) -> PhaseInfo | None:
        """A grant of a holding already marked for preemption (asked again before its
        launch): give it back and wait, so the preempter gets the room; None: go on."""
        try:
            victims = await self.manager.preempted(self.token(ex, node), namespaces)
        except SluiceError:
            victims = ()  # not known now: the renewal finds the mark before the lease lapses
        if not victims:
            return None
        await self._withdraw(ex, node, namespaces)
        self._wait_on(namespaces, ex.id, node.id, self.token(ex, node))
        reason = "preempted by " + ", ".join(v.describe_preempter() for v in victims)
        return PhaseInfo.waiting_for_resources(0, reason)

    def _announce_preempting(
        self, ex: ExecutionState, node: NodeState, victims: Sequence[Victim]
    ) -> None:
        """The preempter's side of a preemption: one PREEMPTING event per victim."""
        for victim in victims:
            key = (self.token(ex, node), victim.namespace, victim.token)
            if key in self._announced:
                continue
            self._announced.add(key)
            ex.events.append(
                EventRecord(
                    execution_id=ex.id,
                    node_id=node.id,
                    attempt=node.record.attempt,
                    phase="PREEMPTING",
                    occurred_at=self.clock.now(),
                    reason=f"preempting {victim.describe()}",
                    info={"namespace": victim.namespace, "victim": victim.token},
                )
            )

    async def preempted_by(self, ex: ExecutionState, node: NodeState) -> str | None:
        """Why the node's attempt must stop for a higher-priority claim (None: it need not).
        SluiceError when the manager cannot answer."""
        if not self._declares_claims(node):
            return None
        if node.lock_names is None:
            node.lock_names = lock_names(node.task, node.record.inputs or {})
        namespaces = [c.namespace for c in self.claims(node)]
        if not namespaces:
            return None
        victims = await self.manager.preempted(self.token(ex, node), namespaces)
        if not victims:
            return None
        return "preempted by " + ", ".join(v.describe_preempter() for v in victims)

    async def _withdraw(self, ex: ExecutionState, node: NodeState, namespaces: list[str]) -> None:
        with contextlib.suppress(SluiceError):
            await self.manager.release(self.token(ex, node), namespaces)

    def _event(
        self, ex: ExecutionState, node: NodeState, phase: str, namespaces: list[str]
    ) -> None:
        ex.events.append(
            EventRecord(
                execution_id=ex.id,
                node_id=node.id,
                attempt=node.record.attempt,
                phase=phase,
                occurred_at=self.clock.now(),
                reason=" ".join(namespaces),
                info={"namespaces": namespaces},
            )
        )

    @staticmethod
    def blocking_lock(reason_namespace: str | None) -> str | None:
        if reason_namespace and reason_namespace.startswith(LOCK_PREFIX):
            return reason_namespace[len(LOCK_PREFIX) :]
        return None

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        """Give back the task's claims and every token its plugin still holds, and withdraw
        every waiter entry the node left in the manager (a refused claim waits there)."""
        holdings = NodeHoldings(ex, node)
        held = holdings.stored
        if held:
            crash_point("engine.before_release")
        if held.get("token"):  # logged before the release: the log never overstates holding
            self._event(ex, node, "RELEASED", list(held.get("namespaces", [])))
        for token, namespaces in [*holdings.held(), *self._waits(ex, node, holdings)]:
            try:
                await self.manager.release(token, namespaces)
            except SluiceError:
                continue  # the lease returns the tokens if this release was lost
        holdings.clear()

    def _waits(
        self, ex: ExecutionState, node: NodeState, holdings: NodeHoldings
    ) -> list[tuple[str, list[str]]]:
        """Where the node may still wait in the manager's queues without holding."""
        waits = holdings.plugin_waits()
        if holdings.stored.get("token") or not self._declares_claims(node):
            return waits
        with contextlib.suppress(SluiceError):
            if node.lock_names is None:
                node.lock_names = lock_names(node.task, node.record.inputs or {})
        namespaces = [c.namespace for c in self.claims(node)]
        return [(self.token(ex, node), namespaces), *waits] if namespaces else waits

    @staticmethod
    def _declares_claims(node: NodeState) -> bool:
        return bool(node.task.claims.quotas or node.task.claims.locks)

    async def renew(self, claims: Mapping[str, Any]) -> list[str]:
        """Extend every lease the node holds; the namespaces (with their tokens) where it no
        longer holds, for the engine to act on."""
        lost: list[str] = []
        for token, namespaces in held_tokens(claims):
            still = await self.manager.renew(token, namespaces)
            lost.extend(f"{ns} ({token})" for ns in namespaces if ns not in still)
        return lost

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """None when the in-flight attempt still holds everything the store says it holds
        (its claims allocated again, idempotently; its plugin's tokens renewed); otherwise why
        it must stop. SluiceError when the manager cannot answer (the caller retries)."""
        rec = node.record
        holdings = NodeHoldings(ex, node)
        await self.adopt(ex, node)
        if self._declares_claims(node):
            if node.lock_names is None:
                node.lock_names = lock_names(node.task, rec.inputs or {})
            claims = self.claims(node)
            try:
                result = await self.manager.allocate(
                    self.token(ex, node), claims, self.holder(ex, node)
                )
            except (InputError, NotFoundError, DefinitionError) as exc:
                return f"its claim cannot be granted any more: {exc}"
            if not result.granted:
                return f"its claim is no longer held: {result.reason()}"
            holdings.claim_granted(self.token(ex, node), [c.namespace for c in claims])
        for namespace, token in holdings.stored.get("plugin_tokens", []):
            if namespace not in await self.manager.renew(token, [namespace]):
                return f"its plugin's token {token} no longer holds {namespace}"
        return None


class NoClaims:
    """The claims gate of an engine without a resource manager: nothing is claimed or held."""

    async def acquire(
        self, ex: ExecutionState, node: NodeState
    ) -> tuple[PhaseInfo | None, str | None]:
        return None, None

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        return None

    async def preempted_by(self, ex: ExecutionState, node: NodeState) -> str | None:
        return None

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        return None

    async def renew(self, claims: Mapping[str, Any]) -> list[str]:
        return []


NO_CLAIMS = NoClaims()
