"""Keyed rate limits in this process's memory: a real backend for tests and single-process use.

Each primitive runs without awaiting, so it is one uninterrupted step on the event loop. With
`now=None` it reads the host's clock.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluice.resources.backends.ratelimit_base import RateLimitBackend
from sluice.resources.ratelimit import gcra
from sluice.resources.ratelimit.models import (
    RATE_LIMIT_SOURCES,
    Admission,
    AdmitRequest,
    KeySnapshot,
    LimitSnapshot,
    RateClaim,
    RateLimitSource,
    RateWaiter,
)
from sluice.spec.rates import RateLimitRule

KeyId = tuple[str, str]


@dataclass(frozen=True)
class Ticket:
    """A token's entry in a key: a waiter's place, or a remembered grant."""

    granted: bool
    units: int
    since: float
    expires_at: float
    execution_id: str = ""
    node_id: str = ""


class MemoryRateLimits(RateLimitBackend):
    def __init__(self) -> None:
        self._rules: dict[str, dict[RateLimitSource, RateLimitRule]] = {}
        self._tats: dict[KeyId, float] = {}
        self._tickets: dict[KeyId, dict[str, Ticket]] = {}

    async def admit(self, request: AdmitRequest, now: float | None) -> Admission:
        at = time.time() if now is None else now
        claims = request.claims
        rules = [gcra.require_rule(c.name, self._rule(c.name)) for c in claims]
        for claim, rule in zip(claims, rules, strict=True):
            gcra.require_fits(claim, rule)
        for claim in claims:
            self._drop_lapsed((claim.name, claim.key), at)
        mine = [self._tickets.get((c.name, c.key), {}).get(request.token) for c in claims]
        if all(t is not None and t.granted for t in mine):
            return Admission(True, at, repeated=True)
        since = min((t.since for t in mine if t is not None and not t.granted), default=at)
        views = [
            self._view(claim, rule, ticket, request.token, since)
            for claim, rule, ticket in zip(claims, rules, mine, strict=True)
        ]
        verdict = gcra.judge(claims, views, at)
        if verdict.granted:
            self._grant(request, verdict.tats, at)
            return Admission(True, at)
        self._wait(
            request,
            mine,
            since,
            gcra.waiter_expiry(verdict.next_at, at, request.recheck, request.grace),
        )
        blocking = claims[verdict.blocking]
        rule = rules[verdict.blocking]
        return Admission(
            False,
            at,
            False,
            verdict.next_at,
            blocking.name,
            blocking.key,
            verdict.position,
            rule.rate,
        )

    def _rule(self, name: str) -> RateLimitRule | None:
        rules = self._rules.get(name, {})
        return next((rules[s] for s in RATE_LIMIT_SOURCES if s in rules), None)

    def _drop_lapsed(self, key: KeyId, now: float) -> None:
        tickets = self._tickets.get(key)
        if tickets is None:
            return
        for token in [t for t, ticket in tickets.items() if ticket.expires_at <= now]:
            del tickets[token]
        if not tickets:
            del self._tickets[key]

    def _view(
        self, claim: RateClaim, rule: RateLimitRule, ticket: Ticket | None, token: str, since: float
    ) -> gcra.KeyView:
        key = (claim.name, claim.key)
        ahead = [
            t
            for other, t in self._tickets.get(key, {}).items()
            if not t.granted and other != token and (t.since, other) < (since, token)
        ]
        return gcra.KeyView(
            rule,
            self._tats.get(key, 0.0),
            ticket is not None and ticket.granted,
            len(ahead),
            sum(t.units for t in ahead),
        )

    def _grant(self, request: AdmitRequest, tats: tuple[float | None, ...], now: float) -> None:
        for claim, tat in zip(request.claims, tats, strict=True):
            key = (claim.name, claim.key)
            if tat is None:
                continue
            self._tats[key] = tat
            tickets = self._tickets.setdefault(key, {})
            tickets.pop(request.token, None)
            if request.remember > 0:
                tickets[request.token] = Ticket(
                    True,
                    claim.units,
                    now,
                    now + request.remember,
                    request.asker.execution_id,
                    request.asker.node_id,
                )
            if not tickets:
                del self._tickets[key]

    def _wait(
        self, request: AdmitRequest, mine: list[Ticket | None], since: float, expires_at: float
    ) -> None:
        for claim, ticket in zip(request.claims, mine, strict=True):
            if ticket is not None and ticket.granted:
                continue
            self._tickets.setdefault((claim.name, claim.key), {})[request.token] = Ticket(
                False,
                claim.units,
                since,
                expires_at,
                request.asker.execution_id,
                request.asker.node_id,
            )

    async def withdraw(self, claims: Sequence[RateClaim], token: str, now: float | None) -> None:
        for claim in claims:
            key = (claim.name, claim.key)
            tickets = self._tickets.get(key, {})
            ticket = tickets.get(token)
            if ticket is not None and not ticket.granted:
                del tickets[token]
            if key in self._tickets and not tickets:
                del self._tickets[key]

    async def set_rules(
        self,
        source: RateLimitSource,
        rules: Mapping[str, RateLimitRule | None],
        now: float | None,
    ) -> None:
        at = time.time() if now is None else now
        for name, rule in rules.items():
            sources = self._rules.setdefault(name, {})
            if rule is None:
                sources.pop(source, None)
            else:
                sources[source] = rule
            if not sources:
                del self._rules[name]
            effective = self._rule(name)
            if effective is not None:
                for key in [k for k in self._tats if k[0] == name]:
                    self._tats[key] = gcra.clamped(effective, self._tats[key], at)

    async def snapshot(self, name: str | None, now: float | None) -> list[LimitSnapshot]:
        at = time.time() if now is None else now
        names = set(self._rules) | {n for n, _ in self._tats} | {n for n, _ in self._tickets}
        chosen = sorted(names if name is None else names & {name})
        snapshots = [self._limit(n, at) for n in chosen]
        return [s for s in snapshots if s.rule is not None or s.keys]

    def _limit(self, name: str, now: float) -> LimitSnapshot:
        sources = self._rules.get(name, {})
        ordered = tuple((s, sources[s]) for s in RATE_LIMIT_SOURCES if s in sources)
        rule = ordered[0][1] if ordered else None
        keys = {k for n, k in self._tats if n == name} | {k for n, k in self._tickets if n == name}
        shown = [self._key(name, key, rule, now) for key in sorted(keys)]
        return LimitSnapshot(
            name,
            rule,
            ordered[0][0] if ordered else None,
            now,
            tuple(k for k in shown if k is not None),
            ordered,
        )

    def _key(
        self, name: str, key: str, rule: RateLimitRule | None, now: float
    ) -> KeySnapshot | None:
        tat = self._tats.get((name, key), 0.0)
        live = [
            (t.since, token, t)
            for token, t in self._tickets.get((name, key), {}).items()
            if not t.granted and t.expires_at > now
        ]
        if gcra.idle(tat, now) and not live:
            return None
        waiters = tuple(
            RateWaiter(i + 1, token, t.execution_id, t.node_id, t.units, t.since, t.expires_at)
            for i, (_, token, t) in enumerate(sorted(live, key=lambda w: (w[0], w[1])))
        )
        free = gcra.next_free(rule, tat, now) if rule else max(tat, now)
        units = gcra.available(rule, tat, now) if rule else 0
        return KeySnapshot(key, tat, free, units, waiters)

    async def sweep(self, now: float | None) -> int:
        at = time.time() if now is None else now
        dropped = 0
        for key in list(self._tickets):
            before = len(self._tickets[key])
            self._drop_lapsed(key, at)
            dropped += before - len(self._tickets.get(key, {}))
        for key in [k for k, tat in self._tats.items() if gcra.idle(tat, at)]:
            del self._tats[key]
            dropped += 1
        return dropped
