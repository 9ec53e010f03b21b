"""Rate limits a task takes before it runs (docs/resources.md, "Rate limits").

`RateLimitedClaims` wraps the claims gate: once the node holds its quotas and locks, it asks
for a slot of every rate limit it declares (keys computed from its inputs), all or nothing,
right before the launch. So a cache hit never reaches it (the cache gate finishes the node
before), and a slot is taken only when the call is about to be made: a node that waited for
a quota after taking its slot would make its call late, bunched with later ones.

Refused, the node gives its quotas and locks back (it must not hold them idle while it waits
for time to pass) and is woken by a timer when its slot comes, with a reason such as
"rate-limited on openai/acme: next slot in 1.2 s, position 3"; it asks again then, keeping
its place in line. A slot once taken is spent: the attempt's failure does not give it back
(rate limits count calls). The token is the node's attempt, so an engine that lost the answer,
or took the node over before its launch was saved, is granted the same slot again instead of
a second one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from sluice.clock import Clock
from sluice.engine.services import NodeClaims
from sluice.engine.state import ExecutionState, NodeState, node_holder
from sluice.errors import InvalidArgumentError, NotFoundError, SluiceError
from sluice.locks.rate_keys import rate_claims
from sluice.plugins.core.phase import PhaseInfo
from sluice.resources import compose_token
from sluice.resources.ratelimit import Admission, Asker, RateClaim, RateLimits
from sluice.store.records import EventRecord

WakeAt = Callable[[str, str, float], None]
"""Step (execution id, node id) again at this engine-clock time."""
UNAVAILABLE_RETRY = 1.0
"""Seconds before a node whose rate limits could not be asked asks again."""


class RateLimitedClaims:
    """A NodeClaims: the inner gate's quotas and locks, then the node's rate limits."""

    def __init__(
        self, inner: NodeClaims, limits: RateLimits, wake_at: WakeAt, clock: Clock
    ) -> None:
        self.inner = inner
        self.limits = limits
        self._wake_at = wake_at
        self._clock = clock

    @staticmethod
    def token(ex: ExecutionState, node: NodeState) -> str:
        """One per attempt: a retry takes a new slot, a repeated ask of one attempt does not."""
        return f"{compose_token(node_holder(ex, node), node.id)}#{node.record.attempt}"

    @staticmethod
    def claims(node: NodeState) -> list[RateClaim]:
        return [RateClaim(*claim) for claim in rate_claims(node.task, node.record.inputs or {})]

    async def acquire(
        self, ex: ExecutionState, node: NodeState
    ) -> tuple[PhaseInfo | None, str | None]:
        info, busy_lock = await self.inner.acquire(ex, node)
        if info is not None or not node.task.claims.rate_limits:
            return info, busy_lock
        try:
            claims = self.claims(node)
            admission = await self.limits.admit(claims, self.token(ex, node), Asker(ex.id, node.id))
        except (InvalidArgumentError, NotFoundError) as exc:
            await self.inner.release(ex, node)
            return PhaseInfo.permanent_failure("BadRateLimit", str(exc)), None
        except SluiceError as exc:
            await self.inner.release(ex, node)
            self._wake(ex, node, UNAVAILABLE_RETRY)
            return PhaseInfo.waiting_for_resources(0, f"rate limits unavailable: {exc}"), None
        if admission.granted:
            self._event(ex, node, claims, admission)
            return None, None
        await self.inner.release(ex, node)  # nothing held idle while time passes
        self._wake(ex, node, self.limits.next_ask(admission))
        return PhaseInfo.waiting_for_resources(0, admission.reason()), None

    def _wake(self, ex: ExecutionState, node: NodeState, delay: float) -> None:
        # The store said how long (its own clock); this engine waits that long on its own.
        self._wake_at(ex.id, node.id, self._clock.now() + delay)

    def _event(
        self, ex: ExecutionState, node: NodeState, claims: list[RateClaim], admission: Admission
    ) -> None:
        labels = [claim.label for claim in claims]
        ex.events.append(
            EventRecord(
                execution_id=ex.id,
                node_id=node.id,
                attempt=node.record.attempt,
                phase="RATE_ADMITTED",
                occurred_at=self._clock.now(),
                reason=" ".join(labels),
                info={
                    "rate_limits": labels,
                    "store_time": admission.now,
                    "repeated": admission.repeated,
                },
            )
        )

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """A launched attempt spent its slot already: only its quotas and locks are checked."""
        return await self.inner.reverify(ex, node)

    async def preempted_by(self, ex: ExecutionState, node: NodeState) -> str | None:
        return await self.inner.preempted_by(ex, node)

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        """Give back the inner claims, and leave the rate limits' lines the node waits in."""
        await self.inner.release(ex, node)
        if not node.task.claims.rate_limits:
            return
        with contextlib.suppress(SluiceError):
            await self.limits.withdraw(self.claims(node), self.token(ex, node))

    async def renew(self, claims: Mapping[str, Any]) -> list[str]:
        return await self.inner.renew(claims)
