"""The admission rule of keyed rate limits, in Python (the memory and SQLite backends run it
inside their transaction; PostgreSQL's function and Redis's script are the same rule).

Per key, GCRA: a key's state is its theoretical arrival time `tat`. With the limit's emission
interval T and burst B, n units conform at time t when max(tat, t) + n*T - t <= B*T; admitting
them sets tat to max(tat, t) + n*T. A key whose tat is behind the clock is idle: its state
says nothing a missing row would not, which is why idle keys can be dropped at any time.

Fair order: a key's waiters are ranked by (first refusal time, token). A claim is admitted
only where nobody live waits ahead of it, so positions mean something and nobody starves. A
token asks for all its claims at once: granted in every key or in none; refused, it waits in
every key with one first refusal time (the earliest it already has).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.errors import RateLimitNeverFitsError, UnknownRateLimitError
from sluice.resources.ratelimit.models import RateClaim
from sluice.spec.rates import RateLimitRule

EPSILON = 1e-9
"""Slack on the conformance test, so float rounding of n*T never refuses an exact slot."""
LATE_WAITER_RETRY = 1.0


@dataclass(frozen=True)
class KeyView:
    """What a transaction read of one key, as seen by the asking token."""

    rule: RateLimitRule
    tat: float
    ticket: bool = False
    """The token holds a live grant here (asked before, within `remember`)."""
    ahead: int = 0
    """Live waiters ranked ahead of the token."""
    ahead_units: int = 0


@dataclass(frozen=True)
class Verdict:
    granted: bool
    tats: tuple[float | None, ...] = ()
    """Granted: each claim's new tat (None where the token already held a ticket)."""
    next_at: float = 0.0
    blocking: int = 0
    """Refused: the index of the claim whose slot comes last."""
    position: int = 0


def require_rule(name: str, rule: RateLimitRule | None) -> RateLimitRule:
    if rule is None:
        raise UnknownRateLimitError(
            f"no rate limit {name!r} is set: set one with `sluice ratelimit set {name} 100/min` "
            "(or resources.rate_limits in the config)"
        )
    return rule


def require_fits(claim: RateClaim, rule: RateLimitRule) -> None:
    """More units than the burst could never conform: refused before anything is written."""
    if claim.units > rule.burst:
        raise RateLimitNeverFitsError(
            f"rate limit {claim.name!r} ({rule.rate}) admits at most {rule.burst} unit(s) at "
            f"once, but a claim takes {claim.units}: it could never be admitted; give the "
            f"limit a burst of at least {claim.units}"
        )


def judge(claims: Sequence[RateClaim], views: Sequence[KeyView], now: float) -> Verdict:
    """Admit every claim or none; refused, when this token's turn should come."""
    slots = [slot(claim, view, now) for claim, view in zip(claims, views, strict=True)]
    if all(
        at <= now and (view.ticket or not view.ahead) for at, view in zip(slots, views, strict=True)
    ):
        tats = tuple(
            None
            if view.ticket
            else base(view.rule, view.tat, now) + claim.units * view.rule.interval
            for claim, view in zip(claims, views, strict=True)
        )
        return Verdict(True, tats)
    blocking = max(range(len(claims)), key=lambda i: (slots[i], views[i].ahead))
    return Verdict(False, (), max(slots), blocking, views[blocking].ahead + 1)


def slot(claim: RateClaim, view: KeyView, now: float) -> float:
    """When the claim's units conform in this key after the waiters ahead took theirs; `now`
    when they conform now (and nobody is ahead), or when the token already holds a ticket."""
    if view.ticket:
        return now
    rule = view.rule
    start = base(rule, view.tat, now)
    units = view.ahead_units + claim.units
    if start + units * rule.interval - now <= rule.burst * rule.interval + EPSILON:
        return now if view.ahead == 0 else now + _turn(rule, view.ahead_units)
    return start + (units - rule.burst) * rule.interval


def base(rule: RateLimitRule, tat: float, now: float) -> float:
    """Where the next admission starts from: the tat, or now for an idle key; never more than
    one full bucket ahead (see `clamped`)."""
    return min(max(tat, now), now + rule.burst * rule.interval)


def clamped(rule: RateLimitRule, tat: float, now: float) -> float:
    """A key's tat when its limit's rule changes at `now`: what the old rule owed beyond one
    full bucket of the new one is forgiven, so a raised limit helps at once. A no-op under an
    unchanged rule: every admission leaves tat <= its time + burst * interval."""
    return min(tat, now + rule.burst * rule.interval)


def _turn(rule: RateLimitRule, ahead_units: int) -> float:
    """A claim that conforms now, behind waiters whose slot has come but who have not taken it
    yet: asked again after their units' worth, at most a second (they come, or lapse)."""
    return min(max(ahead_units, 1) * rule.interval, LATE_WAITER_RETRY)


def waiter_expiry(next_at: float, now: float, recheck: float, grace: float) -> float:
    """A waiter asks again at its slot or after `recheck`, whichever is first; it keeps its
    place `grace` seconds beyond that."""
    return min(next_at, now + recheck) + grace


def next_free(rule: RateLimitRule, tat: float, now: float) -> float:
    """When one unit conforms in a key (waiters aside)."""
    return max(now, base(rule, tat, now) - (rule.burst - 1) * rule.interval)


def available(rule: RateLimitRule, tat: float, now: float) -> int:
    """Units that conform at once now (waiters aside)."""
    debt = base(rule, tat, now) - now
    return max(0, int((rule.burst * rule.interval - debt) / rule.interval + EPSILON))


def idle(tat: float, now: float) -> bool:
    """A key whose state no longer differs from no state at all."""
    return tat <= now
