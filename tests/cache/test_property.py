"""Property: one live owner per reservation, whatever the interleaving of reserve, extend,
release, sweep and the passing of time; the catalog agrees with a five-line model."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.cache import Catalog, MemoryRepository
from sluice.clock import FakeClock
from sluice.config import CacheConfig

OWNERS = st.sampled_from(["a", "b", "c"])
KEYS = st.sampled_from(["k1", "k2"])
MAX_HEARTBEAT, MULTIPLIER = 4.0, 2


@dataclass
class Held:
    owner: str
    expires_at: float


class ReservationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock(0.0)
        config = CacheConfig(
            max_reservation_heartbeat=MAX_HEARTBEAT, heartbeat_grace_period_multiplier=MULTIPLIER
        )
        self.catalog = Catalog(MemoryRepository(), clock=self.clock, config=config)
        self.model: dict[str, Held] = {}
        # What each owner was told it holds: (key, owner) -> expires_at.
        self.granted: dict[tuple[str, str], float] = {}

    def teardown(self) -> None:
        self.loop.close()

    @rule(key=KEYS, owner=OWNERS, heartbeat=st.floats(-2.0, 10.0))
    def reserve(self, key: str, owner: str, heartbeat: float) -> None:
        got = self.loop.run_until_complete(
            self.catalog.get_or_extend_reservation(key, owner, heartbeat)
        )
        now, held = self.clock.now(), self.model.get(key)
        if held is None or held.owner == owner or held.expires_at <= now:
            clamped = heartbeat if 0 < heartbeat < MAX_HEARTBEAT else MAX_HEARTBEAT
            held = self.model[key] = Held(owner, now + clamped * MULTIPLIER)
        assert (got.owner_id, got.expires_at) == (held.owner, held.expires_at)
        if got.owner_id == owner:
            self.granted[key, owner] = got.expires_at

    @rule(key=KEYS, owner=OWNERS)
    def release(self, key: str, owner: str) -> None:
        released = self.loop.run_until_complete(self.catalog.release_reservation(key, owner))
        held = self.model.get(key)
        assert released == (held is not None and held.owner == owner)
        if released:
            del self.model[key]
            self.granted.pop((key, owner), None)

    @rule()
    def sweep(self) -> None:
        swept = self.loop.run_until_complete(self.catalog.sweep_expired())
        expired = [k for k, held in self.model.items() if held.expires_at <= self.clock.now()]
        assert swept == len(expired)
        for key in expired:
            del self.model[key]

    @rule(seconds=st.floats(0.0, 12.0))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def one_live_owner_per_key(self) -> None:
        now = self.clock.now()
        for key in ("k1", "k2"):
            live = [o for (k, o), until in self.granted.items() if k == key and until > now]
            assert len(live) <= 1, (key, live)


ReservationMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)
TestReservationProperty = ReservationMachine.TestCase
