"""Keyed rate limits: the policy over a storage backend (docs/resources.md, "Rate limits").

`RateLimits` owns what is not bookkeeping: validation, where rules come from (operator ??
config ?? plugin), how long waiters keep their place and grants are remembered, the sweeper,
and waiting for a slot. The backend (`backends/ratelimit_*.py`) judges each admission
atomically with the rule of `gcra.py`.

Clock authority: with `clock=None` every admission is judged on the store's clock (what
production uses: engines with skewed clocks share one budget). A `Clock` passed in replaces
it, for tests on a FakeClock. Waiting is timed by a local clock either way: the store says how
long until the slot (a duration), the caller sleeps that long, never polling in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock, SystemClock
from sluice.errors import InvalidArgumentError
from sluice.faults import crash_point
from sluice.resources.ratelimit.models import (
    Admission,
    AdmitRequest,
    Asker,
    LimitSnapshot,
    RateClaim,
    RateLimitRegistrar,
)
from sluice.spec.names import check_rate_limit_name, rate_limit_key_problem
from sluice.spec.rates import RateLimitRule, check_units

if TYPE_CHECKING:
    from sluice.resources.backends.ratelimit_base import RateLimitBackend

log = logging.getLogger(__name__)
RECHECK = 30.0
"""A waiter asks again at least this often (its slot may move: a limit raised, a waiter gone)."""
GRACE = 10.0
"""Seconds a waiter keeps its place past the moment it should ask again."""
REMEMBER = 600.0
"""Seconds a task's grant is remembered: asked again within them (a restarted engine, a retry
after a lost answer) it is granted without taking a second slot."""
SWEEP_INTERVAL = 60.0
NOBODY = Asker()
"""The asker of callers that are not tasks."""


class RateLimits:
    """Rate limits shared by every process that uses the same backend location."""

    def __init__(
        self,
        backend: RateLimitBackend,
        *,
        clock: Clock | None = None,
        config_rules: Mapping[str, RateLimitRule] | None = None,
        recheck: float = RECHECK,
        grace: float = GRACE,
        remember: float = REMEMBER,
        sweep_interval: float = SWEEP_INTERVAL,
    ) -> None:
        for what, value in (("recheck", recheck), ("grace", grace), ("sweep", sweep_interval)):
            if not value > 0:
                raise InvalidArgumentError(f"rate limits: {what} must be > 0 s, got {value!r}")
        self._backend = backend
        self._clock = clock
        self._waits = clock or SystemClock()
        self._config = {check_rate_limit_name(n): r for n, r in (config_rules or {}).items()}
        self._plugin: dict[str, RateLimitRule] = {}
        self._unstored: set[str] = set()
        self._recheck, self._grace, self._remember = recheck, grace, remember
        self._sweep_interval = sweep_interval
        self._sweeper: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._started = False

    def _now(self) -> float | None:
        return None if self._clock is None else self._clock.now()

    # Lifecycle.
    async def start(self) -> None:
        """Connect, store the configured and registered rules, start the sweeper; once."""
        async with self._starting:
            if not self._started:
                await self._start()

    async def _start(self) -> None:
        await self._backend.open()
        try:
            if self._plugin:
                await self._backend.set_rules("plugin", dict(self._plugin), self._now())
                self._unstored.clear()
            if self._config:
                await self._backend.set_rules("config", self._config, self._now())
        except BaseException:
            await self._backend.close()
            raise
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="sluice-ratelimit-sweep")
        self._started = True

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._started:
            await self._backend.close()
        self._started = False

    async def __aenter__(self) -> RateLimits:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # Rules.
    async def set_rule(self, name: str, rule: RateLimitRule) -> None:
        """The operator's rule, stored for every process; it wins over config and plugins."""
        await self._backend.set_rules("operator", {check_rate_limit_name(name): rule}, self._now())

    async def clear_rule(self, name: str) -> None:
        """Drop the operator's rule; the configured or registered one applies again."""
        await self._backend.set_rules("operator", {check_rate_limit_name(name): None}, self._now())

    def register_plugin_rule(self, name: str, rule: RateLimitRule) -> None:
        """A plugin's rule (config and operator rules win), stored at start (or, registered
        later, by `store_plugin_rules`)."""
        self._plugin[check_rate_limit_name(name)] = rule
        self._unstored.add(name)

    async def store_plugin_rules(self) -> None:
        """Start if need be, and store the plugin rules registered since (a plugin loaded
        late); cheap when there are none."""
        await self.start()
        if self._unstored:
            names, self._unstored = self._unstored, set()
            rules = {name: self._plugin[name] for name in names}
            await self._backend.set_rules("plugin", rules, self._now())

    def for_plugin(self, plugin_id: str) -> RateLimitRegistrar:
        """What a plugin gets at load: its own limits, named `<plugin id>/<name>`."""
        return PluginRateLimits(self, check_rate_limit_name(plugin_id))

    # Admissions.
    async def admit(
        self,
        claims: Sequence[RateClaim],
        token: str,
        asker: Asker = NOBODY,
        *,
        remember: float | None = None,
    ) -> Admission:
        """Take every claim's units now, all or nothing, or learn when this token's turn
        comes (and keep its place in each key until a little after). Idempotent per token
        within `remember` seconds (default REMEMBER; 0 for callers that never ask twice)."""
        request = AdmitRequest(
            _checked(claims),
            _check_token(token),
            asker,
            self._remember if remember is None else remember,
            self._recheck,
            self._grace,
        )
        admission = await self._backend.admit(request, self._now())
        crash_point("ratelimit.after_admit")
        return admission

    async def withdraw(self, claims: Sequence[RateClaim], token: str) -> None:
        """Stop waiting: drop the token's places in line (its grants stay counted)."""
        await self._backend.withdraw(_checked(claims), _check_token(token), self._now())

    async def acquire(self, claims: Sequence[RateClaim], asker: Asker = NOBODY) -> Admission:
        """Wait for the slot and take it: for callers that block until they may go (the
        web-API plugin). Cancelled, the caller's place in line is given up at once."""
        token = f"acquire-{uuid.uuid4().hex}"
        try:
            while True:
                admission = await self.admit(claims, token, asker, remember=0)
                if admission.granted:
                    return admission
                await self._waits.sleep(min(admission.wait, self._recheck))
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.withdraw(claims, token))
            raise

    def next_ask(self, admission: Admission) -> float:
        """Seconds after a refusal at which to ask again: the slot, or the recheck if sooner."""
        return min(admission.wait, self._recheck)

    # Visibility.
    async def describe(self, name: str | None = None) -> list[LimitSnapshot]:
        """Rules and their sources, live keys with their next free time, ranked waiters."""
        chosen = None if name is None else check_rate_limit_name(name)
        return await self._backend.snapshot(chosen, self._now())

    async def sweep(self) -> int:
        """Drop lapsed waiters, forgotten grants and idle keys now; how many went."""
        return await self._backend.sweep(self._now())

    async def _sweep_forever(self) -> None:
        while True:
            await self._waits.sleep(self._sweep_interval)
            try:
                await self.sweep()
            except Exception:
                reraise_cancellation()
                log.warning("rate limit sweep failed; retrying next interval", exc_info=True)


class PluginRateLimits:
    """A plugin's view: limits named after the plugin, registered at load, waited for."""

    def __init__(self, limits: RateLimits, plugin_id: str) -> None:
        self._limits = limits
        self._plugin_id = plugin_id

    def name(self, name: str) -> str:
        return f"{self._plugin_id}/{name}"

    def register_rate_limit(self, name: str, rule: RateLimitRule) -> None:
        self._limits.register_plugin_rule(self.name(name), rule)

    async def acquire(self, name: str, key: str = "", units: int = 1) -> None:
        await self._limits.store_plugin_rules()  # loaded late, or before the engine started
        await self._limits.acquire([RateClaim(self.name(name), key, units)])


def _checked(claims: Sequence[RateClaim]) -> tuple[RateClaim, ...]:
    if isinstance(claims, RateClaim) or not claims:
        raise InvalidArgumentError(f"an admission needs a list of RateClaim, got {claims!r}")
    seen: set[tuple[str, str]] = set()
    for claim in claims:
        check_rate_limit_name(claim.name)
        check_units(claim.name, claim.units)
        problem = rate_limit_key_problem(claim.key)
        if problem:
            raise InvalidArgumentError(f"rate limit {claim.name!r}: {problem}")
        if (claim.name, claim.key) in seen:
            raise InvalidArgumentError(f"rate limit key {claim.label!r} is claimed twice")
        seen.add((claim.name, claim.key))
    return tuple(claims)


def _check_token(token: object) -> str:
    if not isinstance(token, str) or not token or len(token) > 512:
        raise InvalidArgumentError(
            f"a rate limit token must be a non-empty string of at most 512 characters, "
            f"got {token!r}"
        )
    return token
