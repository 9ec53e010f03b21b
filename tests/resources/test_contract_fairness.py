"""Contract: fair order among waiters (the rule in sluice/resources/admission.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sluice.clock import FakeClock
from sluice.resources import (
    AllocationStatus,
    Claim,
    Holder,
    QuotaManager,
    ResourceConstraintsSpec,
)
from sluice.resources.admission import STARVATION_BOUND

ALICE = Holder("foo", "dev", "x1", "n1")
Managers = Callable[..., Awaitable[QuotaManager]]


def on(namespace: str, units: int = 1) -> list[Claim]:
    return [Claim(namespace, units=units)]


async def hold(manager: QuotaManager, namespace: str, *tokens: str) -> None:
    for token in tokens:
        assert (await manager.allocate(token, on(namespace), ALICE)).granted


async def test_room_freeing_for_a_big_claim_blocked_only_by_room_is_set_aside_for_it(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 3})
    await hold(manager, "hive", "t1", "t2", "t3")
    assert not (await manager.allocate("big", on("hive", 3), ALICE)).granted
    clock.advance(1)

    await manager.release("t1", ["hive"])
    newcomer = await manager.allocate("small", on("hive"), ALICE)

    assert newcomer.reason() == "waiting for hive: 2/3 in use, older claims first, position 2"
    await manager.release("t2", ["hive"])
    await manager.release("t3", ["hive"])
    assert not (await manager.allocate("small", on("hive"), ALICE)).granted
    assert (await manager.allocate("big", on("hive", 3), ALICE)).granted


async def test_an_overdue_waiter_blocked_by_another_namespace_holds_room_back_from_newcomers(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 3, "lock:p1": 1}, lease=1000)
    await hold(manager, "lock:p1", "p1-owner")
    await hold(manager, "hive", "t1", "t2", "t3")
    writer = [Claim("lock:p1"), Claim("hive", units=3)]
    assert not (await manager.allocate("writer", writer, ALICE)).granted
    clock.advance(1)
    await manager.release("t1", ["hive"])
    assert (await manager.allocate("early", on("hive"), ALICE)).granted  # not overdue yet
    clock.advance(STARVATION_BOUND)

    await manager.release("t2", ["hive"])
    newcomer = await manager.allocate("late", on("hive"), ALICE)

    assert (newcomer.status, newcomer.scope, newcomer.position) == (
        AllocationStatus.EXHAUSTED,
        "global",
        2,
    )
    assert newcomer.reason() == "waiting for hive: 2/3 in use, older claims first, position 2"
    await manager.release("t3", ["hive"])
    await manager.release("early", ["hive"])
    await manager.release("p1-owner", ["lock:p1"])
    assert not (await manager.allocate("late", on("hive"), ALICE)).granted
    assert (await manager.allocate("writer", writer, ALICE)).granted


async def test_an_older_waiter_that_fits_goes_first(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await hold(manager, "warehouse", "t1", "t2")
    await manager.allocate("older", on("warehouse"), ALICE)
    clock.advance(1)
    await manager.release("t1", ["warehouse"])

    assert not (await manager.allocate("newer", on("warehouse"), ALICE)).granted
    assert (await manager.allocate("older", on("warehouse"), ALICE)).granted


async def test_a_waiter_held_back_by_its_project_cap_does_not_block_other_projects(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 10})
    capped = [Claim("hive", constraints=ResourceConstraintsSpec(project_scope=1))]
    assert (await manager.allocate("foo-1", capped, Holder("foo", "dev"))).granted
    refused = await manager.allocate("foo-2", capped, Holder("foo", "dev"))
    assert refused.status is AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
    clock.advance(1)

    assert (await manager.allocate("bar-1", capped, Holder("bar", "dev"))).granted
    assert (await manager.allocate("foo-free", on("hive"), Holder("baz", "dev"))).granted


async def test_positions_follow_first_refusal_time_and_survive_asking_again(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await hold(manager, "warehouse", "t1", "t2")
    for token in ("w1", "w2", "w3"):
        await manager.allocate(token, on("warehouse"), ALICE)
        clock.advance(1)

    positions = [
        (await manager.allocate(t, on("warehouse"), ALICE)).position for t in ("w3", "w1", "w2")
    ]

    assert positions == [3, 1, 2]


async def test_priority_breaks_ties_between_waiters_refused_at_the_same_time(
    manager: QuotaManager,
) -> None:
    await hold(manager, "warehouse", "t1", "t2")

    low = await manager.allocate("low", on("warehouse"), Holder("foo", "dev", priority=0))
    high = await manager.allocate("high", on("warehouse"), Holder("foo", "dev", priority=5))

    assert (low.position, high.position) == (1, 1)
    [snapshot] = await manager.describe("warehouse")
    assert [(w.position, w.token) for w in snapshot.waiters] == [(1, "high"), (2, "low")]


async def test_multi_namespace_waiters_are_served_in_one_order_without_deadlock(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 1})
    assert (await manager.allocate("owner", [Claim("a"), Claim("b")], ALICE)).granted
    assert not (await manager.allocate("first", [Claim("a"), Claim("b")], ALICE)).granted
    clock.advance(1)
    assert not (await manager.allocate("second", [Claim("b"), Claim("a")], ALICE)).granted

    await manager.release("owner", ["a", "b"])

    assert not (await manager.allocate("second", [Claim("b"), Claim("a")], ALICE)).granted
    assert (await manager.allocate("first", [Claim("a"), Claim("b")], ALICE)).granted
    await manager.release("first", ["a", "b"])
    assert (await manager.allocate("second", [Claim("b"), Claim("a")], ALICE)).granted


async def test_room_is_not_held_back_for_waiters_blocked_by_another_namespace(
    managers: Managers, clock: FakeClock
) -> None:
    quotas = {"warehouse": 2, "lock:p1": 1, "lock:p2": 1}
    manager = await managers(config_quotas=quotas)
    await hold(manager, "lock:p1", "p1-owner")
    await hold(manager, "lock:p2", "p2-owner")
    for lock in ("lock:p1", "lock:p2"):
        claim = [Claim(lock), Claim("warehouse")]
        assert not (await manager.allocate(f"{lock}-writer", claim, ALICE)).granted
        clock.advance(1)

    assert (await manager.allocate("reader", on("warehouse"), ALICE)).granted
    [snapshot] = await manager.describe("warehouse")
    assert [(w.token, w.blocking_scope) for w in snapshot.waiters] == [
        ("lock:p1-writer", "other"),
        ("lock:p2-writer", "other"),
    ]
    await manager.release("p1-owner", ["lock:p1"])
    assert (
        await manager.allocate("lock:p1-writer", [Claim("lock:p1"), Claim("warehouse")], ALICE)
    ).granted


async def test_a_multi_namespace_waiter_that_fits_everywhere_keeps_its_place(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 1})
    await hold(manager, "a", "owner-of-a")
    await hold(manager, "b", "owner-of-b")
    assert not (await manager.allocate("both", [Claim("a"), Claim("b")], ALICE)).granted
    clock.advance(1)
    await manager.release("owner-of-a", ["a"])
    await manager.release("owner-of-b", ["b"])

    newcomer = await manager.allocate("only-a", on("a"), ALICE)

    assert (newcomer.status, newcomer.position) == (AllocationStatus.EXHAUSTED, 2)
    assert (await manager.allocate("both", [Claim("a"), Claim("b")], ALICE)).granted


async def test_a_two_namespace_claim_under_streams_on_each_is_granted_in_bound(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 1}, lease=1000)
    held = {"a": "a0", "b": "b0"}
    await hold(manager, "a", "a0")
    await hold(manager, "b", "b0")
    both = [Claim("a"), Claim("b")]
    assert not (await manager.allocate("both", both, ALICE)).granted
    first_refused, step, overtaken = clock.now(), 5.0, 0
    for i in range(1, 100):
        clock.advance(step)
        ns = "ab"[i % 2]  # the two namespaces free up in turn, never together
        await manager.release(held.pop(ns), [ns])
        if (await manager.allocate("both", both, ALICE)).granted:
            break
        if (await manager.allocate(f"{ns}{i}", on(ns), ALICE)).granted:
            held[ns] = f"{ns}{i}"
            overtaken += 1
    else:
        raise AssertionError("the two-namespace claim was starved")

    assert overtaken > 0
    assert clock.now() - first_refused <= STARVATION_BOUND + 2 * step


async def test_no_room_is_held_for_a_multi_unit_waiter_refused_here_and_by_another_namespace(
    managers: Managers, clock: FakeClock
) -> None:
    # Refused by both at once, it could not take the room here even if p1 were free: the
    # room freeing here goes to a reader (only a claim blocked by room here alone, or one
    # that could take the room now, has it set aside).
    manager = await managers(config_quotas={"warehouse": 2, "lock:p1": 1})
    await hold(manager, "lock:p1", "p1-owner")
    await hold(manager, "warehouse", "r1", "r2")
    writer = [Claim("lock:p1"), Claim("warehouse", units=2)]
    assert not (await manager.allocate("writer", writer, ALICE)).granted
    clock.advance(1)

    await manager.release("r1", ["warehouse"])

    assert (await manager.allocate("reader", on("warehouse"), ALICE)).granted
    [snapshot] = await manager.describe("warehouse")
    assert [(w.token, w.blocking_scope) for w in snapshot.waiters] == [("writer", "global")]


async def test_a_multi_namespace_claim_blocked_only_by_room_in_one_namespace_gets_it_there(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 2})
    await hold(manager, "b", "b-owner")
    both = [Claim("a"), Claim("b", units=2)]
    assert not (await manager.allocate("both", both, ALICE)).granted
    clock.advance(1)

    in_b = await manager.allocate("only-b", on("b"), ALICE)

    assert in_b.reason() == "waiting for b: 1/2 in use, older claims first, position 2"
    await manager.release("b-owner", ["b"])
    assert (await manager.allocate("both", both, ALICE)).granted


async def test_a_waiter_that_another_namespace_blocks_since_stops_holding_room_at_its_next_ask(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 2})
    await hold(manager, "b", "b-owner")
    both = [Claim("a"), Claim("b", units=2)]
    assert not (await manager.allocate("both", both, ALICE)).granted  # blocked by b alone
    clock.advance(1)
    assert (await manager.allocate("a-taker", on("a"), ALICE)).granted

    assert not (await manager.allocate("both", both, ALICE)).granted  # now by a too

    assert (await manager.allocate("only-b", on("b"), ALICE)).granted


@pytest.mark.parametrize(
    "caps",
    [ResourceConstraintsSpec(project_scope=2), ResourceConstraintsSpec(namespace_scope=2)],
    ids=["project", "project/domain"],
)
async def test_a_multi_unit_waiter_over_its_own_cap_holds_no_room_back(
    managers: Managers, clock: FakeClock, caps: ResourceConstraintsSpec
) -> None:
    foo, bar = Holder("foo", "dev"), Holder("bar", "dev")
    manager = await managers(config_quotas={"hive": 4})
    for token in ("f1", "f2"):
        assert (await manager.allocate(token, on("hive"), foo)).granted
    for token in ("b1", "b2"):
        assert (await manager.allocate(token, on("hive"), bar)).granted
    capped = [Claim("hive", units=2, constraints=caps)]
    assert not (await manager.allocate("foo-big", capped, foo)).granted
    clock.advance(1)

    await manager.release("b1", ["hive"])
    await manager.release("b2", ["hive"])

    assert (await manager.allocate("bar-big", on("hive", 2), bar)).granted


# A stream of 1-unit claimers holding their unit for HOLD seconds in a loop, and one claim
# of several units among them; the wait is counted in grants to others, a turnover being
# `quota` grants (every unit changed hands once).
HOLD = 0.1
STREAM = Holder("bar", "dev")


class Stream:
    """Claimers of one unit of `hive` on the fake clock. After each release the releaser asks
    again at once (a claimer in a loop), then every waiter asks again, oldest first."""

    def __init__(self, manager: QuotaManager, clock: FakeClock) -> None:
        self.manager, self.clock = manager, clock
        self.holding: dict[str, float] = {}  # token -> when it releases
        self.waiting: list[str] = []  # in first-refusal order
        self.granted: list[str] = []

    async def start(self, claimers: int) -> None:
        for i in range(claimers):
            await self.ask(f"c{i}.0")
            self.clock.advance(HOLD / claimers)

    async def ask(self, token: str) -> None:
        if (await self.manager.allocate(token, on("hive"), STREAM)).granted:
            self.holding[token] = self.clock.now() + HOLD
            self.granted.append(token)
            if token in self.waiting:
                self.waiting.remove(token)
        elif token not in self.waiting:
            self.waiting.append(token)

    async def step(self) -> None:
        """The next release, then the asks it prompts."""
        token, until = min(self.holding.items(), key=lambda item: item[1])
        self.clock.advance(max(0.0, until - self.clock.now()))
        del self.holding[token]
        await self.manager.release(token, ["hive"])
        claimer, cycle = token.split(".")
        await self.ask(f"{claimer}.{int(cycle) + 1}")
        for waiter in list(self.waiting):
            await self.ask(waiter)


async def test_a_four_unit_claim_among_eight_one_unit_claimers_waits_one_turnover(
    managers: Managers, clock: FakeClock
) -> None:
    quota = 4
    manager = await managers(config_quotas={"hive": quota}, lease=1000)
    stream = Stream(manager, clock)
    await stream.start(claimers=8)
    for _ in range(2 * quota):  # two turnovers: the stream is in its steady state
        await stream.step()
    big = on("hive", quota)
    assert not (await manager.allocate("big", big, ALICE)).granted
    ahead, before = list(stream.waiting), len(stream.granted)

    for _ in range(10 * quota):  # ten turnovers: far past the bound, far below STARVATION_BOUND
        await stream.step()
        if (await manager.allocate("big", big, ALICE)).granted:
            break
    else:
        raise AssertionError(f"still waiting after {len(stream.granted) - before} grants")

    overtook = stream.granted[before:]
    assert len(ahead) == 8 - quota
    assert set(overtook) <= set(ahead), "a claimer that came after it was granted first"
    assert len(overtook) / quota <= 1.0  # at most one turnover


@pytest.mark.parametrize("blocked_by", ["lock", "project cap", "project/domain cap"])
async def test_a_multi_unit_claim_blocked_elsewhere_or_by_its_cap_leaves_no_room_idle(
    managers: Managers, clock: FakeClock, blocked_by: str
) -> None:
    manager = await managers(config_quotas={"hive": 4, "lock:p1": 1}, lease=1000)
    foo = Holder("foo", "dev")
    if blocked_by == "lock":
        await hold(manager, "lock:p1", "p1-owner")
        claim, free = [Claim("lock:p1"), Claim("hive", units=4)], 4
    else:
        assert (await manager.allocate("foo-long", on("hive"), foo)).granted
        caps = (
            ResourceConstraintsSpec(project_scope=3)
            if blocked_by == "project cap"
            else ResourceConstraintsSpec(namespace_scope=3)
        )
        claim, free = [Claim("hive", units=3, constraints=caps)], 3
    stream = Stream(manager, clock)
    await stream.start(claimers=8)
    assert not (await manager.allocate("big", claim, foo)).granted

    for _ in range(2 * free):  # two turnovers, the claim asking again after each release
        await stream.step()
        assert not (await manager.allocate("big", claim, foo)).granted
        [snapshot] = await manager.describe("hive")
        assert snapshot.in_use == 4, "room stood idle for a claim that cannot use it"
