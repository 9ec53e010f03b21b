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

ALICE = Holder("foo", "dev", "x1", "n1")
Managers = Callable[..., Awaitable[QuotaManager]]


def on(namespace: str, units: int = 1) -> list[Claim]:
    return [Claim(namespace, units=units)]


async def hold(manager: QuotaManager, namespace: str, *tokens: str) -> None:
    for token in tokens:
        assert (await manager.allocate(token, on(namespace), ALICE)).granted


async def test_a_big_claim_is_not_starved_by_small_newcomers(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 3})
    await hold(manager, "hive", "t1", "t2", "t3")
    assert not (await manager.allocate("big", on("hive", 3), ALICE)).granted
    clock.advance(1)

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


async def test_a_multi_namespace_waiter_keeps_its_place_where_it_already_fits(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 1})
    await hold(manager, "b", "owner-of-b")
    assert not (await manager.allocate("both", [Claim("a"), Claim("b")], ALICE)).granted
    clock.advance(1)

    newcomer = await manager.allocate("only-a", on("a"), ALICE)

    assert (newcomer.status, newcomer.position) == (AllocationStatus.EXHAUSTED, 2)
    [snapshot] = await manager.describe("a")
    assert [(w.token, w.blocking_scope) for w in snapshot.waiters] == [
        ("both", "other"),
        ("only-a", "global"),
    ]
