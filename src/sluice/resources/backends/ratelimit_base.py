"""The storage seam of keyed rate limits: five atomic primitives, no policy.

A backend stores, per limit name, a rule from each source (operator, config, plugin); per
(name, key), the GCRA state `tat`; and per (name, key, token), a ticket: a waiter's place in
line or a remembered grant. `admit` applies the rule of `sluice.resources.ratelimit.gcra`.

Time: every primitive takes `now: float | None`. None means the store's own clock, read inside
the atomic step (PostgreSQL's `clock_timestamp()` in the statement, Redis's `TIME` in the
script, the host's clock for SQLite and memory, whose processes share one machine): what
production passes, so engines with skewed clocks still share one budget. A float is a test
clock's time, which keeps tests on a FakeClock deterministic on every backend. Times are float
seconds since the epoch. Driver errors leave as BackendUnavailableError or the store's errors.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from sluice.resources.ratelimit.models import (
    Admission,
    AdmitRequest,
    LimitSnapshot,
    RateClaim,
    RateLimitSource,
)
from sluice.spec.rates import RateLimitRule


class RateLimitBackend(abc.ABC):
    """Atomic GCRA bookkeeping shared by every process that opens the same location."""

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect; called once before any other method."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Disconnect; idempotent."""

    @abc.abstractmethod
    async def admit(self, request: AdmitRequest, now: float | None) -> Admission:
        """Judge every claim of the request at once, in one atomic step: all or nothing.

        First, with nothing written: a name with no rule from any source raises
        UnknownRateLimitError; a claim of more units than its rule's burst raises
        RateLimitNeverFitsError. Then lapsed tickets of those keys are dropped, and the
        claims judged by `gcra.judge` (a live grant ticket of the token counts as admitted).

        Granted: each key's tat moves (`gcra.judge`), the token's waiter entries there are
        removed and, if `request.remember` > 0, a grant ticket kept that long; a token that
        held a grant ticket everywhere is granted again without counting (`repeated`).
        Refused: nothing is counted; the token waits in every key it has no grant in, with one
        first-refusal time, its entry lasting `gcra.waiter_expiry`; the answer names the key
        whose slot comes last, the token's rank there, and the store time of that slot.
        """

    @abc.abstractmethod
    async def withdraw(self, claims: Sequence[RateClaim], token: str, now: float | None) -> None:
        """Drop the token's waiter entries in these keys at once (it stopped asking); grants
        stay counted. Idempotent: unknown keys or tokens are a no-op."""

    @abc.abstractmethod
    async def set_rules(
        self,
        source: RateLimitSource,
        rules: Mapping[str, RateLimitRule | None],
        now: float | None,
    ) -> None:
        """Store (or with None, clear) the `source` rule of each name. Key states are kept: a
        new rule applies from the next admission on, to the tat already reached."""

    @abc.abstractmethod
    async def snapshot(self, name: str | None, now: float | None) -> list[LimitSnapshot]:
        """Rules, live keys (not idle, or with waiters) and ranked live waiters of one name
        (or every name with a rule or a live key), read consistently, sorted by name."""

    @abc.abstractmethod
    async def sweep(self, now: float | None) -> int:
        """Drop lapsed tickets and idle key states (tat <= now) everywhere; how many went.
        Dropping an idle state changes no answer: bounded storage, not behaviour."""
