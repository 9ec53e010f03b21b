"""Contract: fair order among waiters (the rule in sluice/resources/admission.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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


async def test_room_a_big_claim_cannot_use_yet_goes_to_newcomers(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 3})
    await hold(manager, "hive", "t1", "t2", "t3")
    assert not (await manager.allocate("big", on("hive", 3), ALICE)).granted
    clock.advance(1)

    await manager.release("t1", ["hive"])

    assert (await manager.allocate("small", on("hive"), ALICE)).granted
    refused = await manager.allocate("big", on("hive", 3), ALICE)
    assert refused.reason() == "waiting for hive: 3/3 in use, position 1"


async def test_an_overdue_big_claim_holds_room_back_from_newcomers(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 3}, lease=1000)
    await hold(manager, "hive", "t1", "t2", "t3")
    assert not (await manager.allocate("big", on("hive", 3), ALICE)).granted
    clock.advance(STARVATION_BOUND)

    await manager.release("t1", ["hive"])
    newcomer = await manager.allocate("small", on("hive"), ALICE)

    assert (newcomer.status, newcomer.scope, newcomer.position) == (
        AllocationStatus.EXHAUSTED,
        "global",
        2,
    )
    assert newcomer.reason() == "waiting for hive: 2/3 in use, older claims first, position 2"
    await manager.release("t2", ["hive"])
    await manager.release("t3", ["hive"])
    assert not (await manager.allocate("small", on("hive"), ALICE)).granted
    assert (await manager.allocate("big", on("hive", 3), ALICE)).granted


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


async def test_a_two_unit_claim_under_a_stream_of_one_unit_newcomers_is_granted_in_bound(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 2}, lease=1000)
    await hold(manager, "hive", "n0", "n1")
    assert not (await manager.allocate("big", on("hive", 2), ALICE)).granted
    first_refused, step, overtaken = clock.now(), 5.0, 0
    holders = ["n0", "n1"]
    for i in range(2, 100):
        clock.advance(step)
        await manager.release(holders.pop(0), ["hive"])
        if (await manager.allocate("big", on("hive", 2), ALICE)).granted:
            break
        if (await manager.allocate(f"n{i}", on("hive"), ALICE)).granted:
            holders.append(f"n{i}")
            overtaken += 1
    else:
        raise AssertionError("the two-unit claim was starved")

    assert overtaken > 0  # newcomers used the room it could not, before the bound
    assert clock.now() - first_refused <= STARVATION_BOUND + 2 * step


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
