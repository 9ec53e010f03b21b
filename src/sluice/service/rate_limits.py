"""Rate limits as a verb of the service: list (limits, live keys, next free times, waiters),
set and clear an operator's limit. `Sluice.rate_limits` hands this out; every adapter (CLI,
HTTP API) calls one method and renders the views.

A caller scoped to some projects sees every limit and its rule (the deployment's, which its
waits depend on), but of the keys (computed from tasks' inputs, like lock names) only those
its own tasks wait in, and only its own waiters there."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sluice.errors import PermissionDeniedError
from sluice.resources.ratelimit import KeySnapshot, LimitSnapshot, RateLimitRule
from sluice.service import visibility
from sluice.service.models import View, utc
from sluice.spec.names import check_rate_limit_name

if TYPE_CHECKING:
    from sluice.runtime import Runtime
    from sluice.service.requests import Scope


class RateLimitWaiter(View):
    position: int
    execution_id: str
    node_id: str
    units: int
    since: datetime
    """When it was first refused: the waiters' order."""
    expires_at: datetime
    """When it loses its place unless it asks again."""


class RateLimitKey(View):
    key: str
    """"" for the single budget of a limit without a key template."""
    next_free: datetime
    """When one unit could be admitted (waiters aside)."""
    next_free_in: float
    """Seconds from the store's now to `next_free`."""
    available: int
    """Units that could be admitted at once now (waiters aside)."""
    waiters: list[RateLimitWaiter] = []


class RateLimitView(View):
    name: str
    rate: str | None
    """The effective limit, e.g. "100/min" or "100/min, burst 10"; None if no source sets it."""
    source: str | None
    burst: int | None
    interval: float | None
    """Seconds per unit at the sustained pace (the GCRA emission interval)."""
    rates: list[tuple[str, str]] = []
    """Every source that sets this limit and its rate, highest precedence first."""
    keys: list[RateLimitKey] = []


def _view(snapshot: LimitSnapshot) -> RateLimitView:
    rule = snapshot.rule
    return RateLimitView(
        name=snapshot.name,
        rate=rule.rate if rule else None,
        source=snapshot.source,
        burst=rule.burst if rule else None,
        interval=rule.interval if rule else None,
        rates=[(source, r.rate) for source, r in snapshot.rules],
        keys=[_key(k, snapshot.now) for k in snapshot.keys],
    )


def _key(key: KeySnapshot, now: float) -> RateLimitKey:
    return RateLimitKey(
        key=key.key,
        next_free=_at(key.next_free),
        next_free_in=round(max(0.0, key.next_free - now), 3),
        available=key.available,
        waiters=[
            RateLimitWaiter(
                position=w.position,
                execution_id=w.execution_id,
                node_id=w.node_id,
                units=w.units,
                since=_at(w.since),
                expires_at=_at(w.expires_at),
            )
            for w in key.waiters
        ],
    )


def _at(timestamp: float) -> datetime:
    at = utc(timestamp)
    assert at is not None
    return at


class RateLimitService:
    def __init__(self, runtime: Runtime, scope: Scope) -> None:
        self._runtime = runtime
        self._scope = scope

    async def describe(self, name: str | None = None) -> list[RateLimitView]:
        """Limits with their rule and sources, live keys, next free times and waiters."""
        if name is not None:
            check_rate_limit_name(name)
        limits = self._runtime.rate_limits
        await limits.start()
        views = [_view(s) for s in await limits.describe(name)]
        return await self._visible(views)

    async def set(self, name: str, rate: str, burst: int | None = None) -> RateLimitView:
        """The operator's limit for every engine ("100/min", per s, min, hour or day); it wins
        over the config and plugins, and applies from the next admission."""
        self._may_write()
        rule = RateLimitRule.parse(rate, burst)
        limits = self._runtime.rate_limits
        await limits.start()
        await limits.set_rule(check_rate_limit_name(name), rule)
        return (await self.describe(name))[0]

    async def clear(self, name: str) -> RateLimitView:
        """Drop the operator's limit (the configured or registered one applies again)."""
        self._may_write()
        limits = self._runtime.rate_limits
        await limits.start()
        await limits.clear_rule(check_rate_limit_name(name))
        found = await self.describe(name)
        if not found:
            return RateLimitView(name=name, rate=None, source=None, burst=None, interval=None)
        return found[0]

    def _may_write(self) -> None:
        if self._scope.read_only:
            raise PermissionDeniedError("this token is read-only")
        if self._scope.projects is not None:
            raise PermissionDeniedError("only an unscoped caller may change deployment settings")

    async def _visible(self, views: list[RateLimitView]) -> list[RateLimitView]:
        projects = self._scope.projects
        if projects is None:
            return views
        ids = {w.execution_id for v in views for k in v.keys for w in k.waiters}
        seen = await visibility.visible_executions(self._runtime, ids, projects)
        shown = []
        for view in views:
            keys = [
                k.model_copy(update={"waiters": [w for w in k.waiters if w.execution_id in seen]})
                for k in view.keys
            ]
            shown.append(view.model_copy(update={"keys": [k for k in keys if k.waiters]}))
        return shown
