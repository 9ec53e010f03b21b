"""Property test: the policy on every backend and a fake clock, against a plain model of
holders, leases and waiters.

The model does not re-run the admission rule; it checks what any correct manager must do
(docs/resources.md): a grant never exceeds the quota or the project cap at that moment, nor
overtakes the units of older uncapped waiters blocked only by room in that namespace (whether
or not those fit yet) or overdue; a claim that fits where every older waiter is blocked by
its own cap, or by another namespace of its claim and too big for the free room, is granted
(room is not held back for waiters that cannot use it); a claim larger than the quota raises
and writes nothing; refusals report true figures; renewal reports exactly the live grants;
and the books (holders, in use, ranked waiters) always match.

Each example uses namespaces of its own, so examples share one backend location.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from sluice.clock import FakeClock
from sluice.errors import ClaimExceedsQuotaError
from sluice.resources import (
    AllocationResult,
    AllocationStatus,
    Claim,
    Holder,
    QuotaManager,
    ResourceConstraintsSpec,
)
from sluice.resources.admission import STARVATION_BOUND
from sluice.resources.backends.base import ResourceBackend
from sluice.resources.backends.memory import MemoryBackend

QUOTAS = {"a": 2, "b": 3}


class Location(Protocol):
    """conftest's Location: a backend name and how to open one there."""

    name: str

    def backend(self) -> ResourceBackend: ...


LEASE = 10.0
T = TypeVar("T")


@dataclass
class Held:
    project: str
    units: int
    expiry: float


@dataclass
class Waiting:
    project: str
    units: int
    cap: int | None
    since: float
    expiry: float
    elsewhere: bool | None
    """Whether another namespace of its claim refused it at its last ask: False for a claim
    on this namespace alone, True where the refusal named another namespace, None where the
    model cannot tell (the named namespace of a claim on several: True if another refused
    too)."""


EXAMPLES = itertools.count()


class QuotaModel(RuleBasedStateMachine):
    location: ClassVar[Location]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        example = next(EXAMPLES)
        self.names = {ns: f"m{example}-{ns}" for ns in QUOTAS}
        location = self.location
        backend = MemoryBackend() if location.name == "memory" else location.backend()
        self.manager = QuotaManager(
            backend,
            clock=self.clock,
            lease=LEASE,
            config_quotas={self.names[ns]: q for ns, q in QUOTAS.items()},
            sweep_interval=1e9,
        )
        self.run(self.manager.start())
        self.quota = dict(QUOTAS)
        self.held: dict[str, dict[str, Held]] = {ns: {} for ns in QUOTAS}
        self.waiting: dict[str, dict[str, Waiting]] = {ns: {} for ns in QUOTAS}

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def teardown(self) -> None:
        tokens = {t for book in (*self.held.values(), *self.waiting.values()) for t in book}
        for token in sorted(tokens):  # leave the shared location tidy for the next example
            self.run(self.manager.release(token, list(self.names.values())))
        self.run(self.manager.close())
        self.loop.close()

    def overdue(self, waiter: Waiting) -> bool:
        return self.clock.now() - waiter.since >= STARVATION_BOUND

    # The model's books.
    def in_use(self, ns: str) -> int:
        return sum(h.units for h in self.held[ns].values())

    def project_use(self, ns: str, project: str) -> int:
        return sum(h.units for h in self.held[ns].values() if h.project == project)

    def reclaim(self, namespaces: list[str]) -> set[str]:
        now, touched = self.clock.now(), set()
        for ns in namespaces:
            for book in (self.held[ns], self.waiting[ns]):
                for token in [t for t, entry in book.items() if entry.expiry <= now]:
                    del book[token]
                    touched.add(ns)
        return touched

    def older(self, ns: str, token: str, since: float) -> list[Waiting]:
        return [w for t, w in self.waiting[ns].items() if (w.since, t) < (since, token)]

    def since_of(self, token: str, namespaces: list[str]) -> float:
        known = [self.waiting[ns][token].since for ns in namespaces if token in self.waiting[ns]]
        return min(known, default=self.clock.now())

    # Rules.
    @initialize(waiter_units=st.sampled_from([2, 1]))
    def start_with_a_waiter_that_cannot_use_free_room(self, waiter_units: int) -> None:
        # a: 1/2 in use and a waiter ranked first wanting more than the free unit (or exactly
        # it): blocked only by room in a, it holds the free unit back either way, so the
        # first steps already tell holding room back for it from granting past it.
        self.allocate("t4", ["a"], 1, "foo", None)
        self.allocate("t0", ["a"], waiter_units, "foo", None)
        self.allocate("t1", ["a"], 1, "foo", None)  # judged by the checks like any other

    @rule(
        token=st.sampled_from(["t0", "t1", "t2", "t3", "t4"]),
        namespaces=st.lists(st.sampled_from(sorted(QUOTAS)), min_size=1, max_size=2, unique=True),
        units=st.integers(1, 3),
        project=st.sampled_from(["foo", "foobar"]),
        cap=st.none() | st.integers(1, 3),
    )
    def allocate(
        self, token: str, namespaces: list[str], units: int, project: str, cap: int | None
    ) -> None:
        constraints = ResourceConstraintsSpec(project_scope=cap) if cap else None
        claims = [Claim(self.names[ns], units, constraints) for ns in namespaces]
        holder = Holder(project, "dev")
        if any(units > self.quota[ns] for ns in namespaces):
            with pytest.raises(ClaimExceedsQuotaError):  # and nothing is written (books_match)
                self.run(self.manager.allocate(token, claims, holder))
            return
        self.reclaim(namespaces)  # as the backend does before judging
        since = self.since_of(token, namespaces)
        todo = [ns for ns in namespaces if token not in self.held[ns]]
        result = self.run(self.manager.allocate(token, claims, holder))
        if result.granted:
            self.check_grant(token, todo, units, project, cap, since)
            self.book_grant(token, namespaces, todo, units, project)
        else:
            self.check_refusal(result, token, todo, units, project, cap, since)
            named = next(ns for ns, name in self.names.items() if name == result.namespace)
            self.book_wait(token, namespaces, todo, units, project, cap, since, named)

    def check_grant(
        self,
        token: str,
        todo: list[str],
        units: int,
        project: str,
        cap: int | None,
        since: float,
    ) -> None:
        for ns in todo:
            assert self.in_use(ns) + units <= self.quota[ns], "granted beyond the quota"
            assert cap is None or self.project_use(ns, project) + units <= cap, "beyond the cap"
            # Older uncapped waiters blocked only by room here, or overdue, set their units
            # aside whether or not they fit yet: a grant must leave room for all of them.
            aside = sum(
                w.units
                for w in self.older(ns, token, since)
                if w.cap is None
                and w.units <= self.quota[ns]
                and (w.elsewhere is False or self.overdue(w))
            )
            assert self.in_use(ns) + aside + units <= self.quota[ns], "overtook older waiters"

    def check_refusal(
        self,
        result: AllocationResult,
        token: str,
        todo: list[str],
        units: int,
        project: str,
        cap: int | None,
        since: float,
    ) -> None:
        fits = all(
            self.in_use(ns) + units <= self.quota[ns]
            and (cap is None or self.project_use(ns, project) + units <= cap)
            and all(self.sets_nothing_aside(ns, w) for w in self.older(ns, token, since))
            for ns in todo
        )
        assert not fits, "refused a claim that fits where no older waiter could use the room"
        ns = next(ns for ns, name in self.names.items() if name == result.namespace)
        assert ns in todo
        if result.status is AllocationStatus.EXHAUSTED:
            assert (result.in_use, result.limit) == (self.in_use(ns), self.quota[ns])
        else:
            assert self.in_use(ns) + units <= self.quota[ns]
            assert (result.scope, result.limit) == ("project", cap)
            assert result.in_use == self.project_use(ns, project)

    def sets_nothing_aside(self, ns: str, waiter: Waiting) -> bool:
        """Certainly: blocked by its own cap whatever older waiters set aside, or too big for
        the quota, or blocked by another namespace of its claim and unable to take the room
        here now, and not overdue."""
        capped = waiter.cap is not None and (
            self.project_use(ns, waiter.project) + waiter.units > waiter.cap
        )
        too_big = waiter.units > self.quota[ns]
        cannot_fit = self.in_use(ns) + waiter.units > self.quota[ns]
        blocked_elsewhere = waiter.elsewhere is True and cannot_fit and not self.overdue(waiter)
        return capped or too_big or blocked_elsewhere

    def book_grant(
        self, token: str, namespaces: list[str], todo: list[str], units: int, project: str
    ) -> None:
        expiry = self.clock.now() + LEASE
        for ns in namespaces:
            self.waiting[ns].pop(token, None)
            if ns in todo:
                self.held[ns][token] = Held(project, units, expiry)
            else:
                self.held[ns][token].expiry = expiry

    def book_wait(
        self,
        token: str,
        namespaces: list[str],
        todo: list[str],
        units: int,
        project: str,
        cap: int | None,
        since: float,
        named: str,
    ) -> None:
        expiry = self.clock.now() + LEASE
        for ns in namespaces:
            if ns in todo:
                elsewhere = True if ns != named else (False if len(todo) == 1 else None)
                self.waiting[ns][token] = Waiting(project, units, cap, since, expiry, elsewhere)
            else:
                self.held[ns][token].expiry = expiry

    @rule(
        token=st.sampled_from(["t0", "t1", "t2", "t3", "t4", "unknown"]),
        namespaces=st.lists(st.sampled_from(sorted(QUOTAS)), min_size=1, unique=True),
    )
    def release(self, token: str, namespaces: list[str]) -> None:
        self.run(self.manager.release(token, [self.names[ns] for ns in namespaces]))
        for ns in namespaces:
            self.held[ns].pop(token, None)
            self.waiting[ns].pop(token, None)

    @rule(token=st.sampled_from(["t0", "t1", "t2"]))
    def renew(self, token: str) -> None:
        now, namespaces = self.clock.now(), sorted(QUOTAS)
        renewed = self.run(self.manager.renew(token, [self.names[ns] for ns in namespaces]))
        held = {ns for ns in namespaces if self.names[ns] in renewed}
        live = {
            ns for ns in namespaces if token in self.held[ns] and self.held[ns][token].expiry > now
        }
        assert held == live
        for ns in namespaces:
            for entry in (self.held[ns].get(token), self.waiting[ns].get(token)):
                if entry is not None and entry.expiry > now:
                    entry.expiry = now + LEASE

    @rule(seconds=st.sampled_from([1.0, 4.0, 11.0, STARVATION_BOUND]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def sweep(self) -> None:
        touched = set(self.run(self.manager.sweep())) & set(self.names.values())
        assert touched == {self.names[ns] for ns in self.reclaim(sorted(QUOTAS))}

    @rule(ns=st.sampled_from(sorted(QUOTAS)), quota=st.integers(1, 4))
    def set_quota(self, ns: str, quota: int) -> None:
        self.run(self.manager.set_quota(self.names[ns], quota))
        self.quota[ns] = quota  # lowering it revokes nothing: the books stay as they are

    @invariant()
    def books_match(self) -> None:
        now = self.clock.now()
        for ns, name in self.names.items():
            [snapshot] = self.run(self.manager.describe(name))
            assert {h.token: h.units for h in snapshot.holders} == {
                t: h.units for t, h in self.held[ns].items()
            }
            assert snapshot.in_use == self.in_use(ns)
            live = sorted((w.since, t) for t, w in self.waiting[ns].items() if w.expiry > now)
            assert [w.token for w in snapshot.waiters] == [t for _, t in live]


RUNS_PER_BACKEND = {
    "memory": (100, 30),
    "sqlite": (6, 25),
    "postgresql": (8, 25),
    "redis": (50, 30),
}
"""(examples, steps each): a few seconds per backend in CI (a SQL example opens a database)."""


def test_every_backend_keeps_the_books_of_the_model(location: Location) -> None:
    machine = type(f"QuotaModel_{location.name}", (QuotaModel,), {"location": location})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=RUNS_PER_BACKEND[location.name][0],
            stateful_step_count=RUNS_PER_BACKEND[location.name][1],
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
