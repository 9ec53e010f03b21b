"""Contract: priority preemption (docs/resources.md, "Priority preemption").

A claim refused by room in a namespace where preemption is on marks the fewest holders of
strictly lower priority, lowest first then most recent, never more than it needs, never one
of equal or higher priority, idempotently; a marked holder is no longer renewed as held, and
the room it frees goes to the preempter, ahead of lower-priority waiters. Run on memory,
SQLite and PostgreSQL; Redis does not implement preemption yet (it refuses the flag).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sluice.clock import FakeClock
from sluice.errors import InvalidArgumentError
from sluice.resources import Claim, Holder, QuotaManager

Managers = Callable[..., Awaitable[QuotaManager]]
WH = [Claim("warehouse")]


def holder(name: str, priority: int) -> Holder:
    return Holder("foo", "dev", name, "n1", priority=priority)


@pytest.fixture
async def pm(managers: Managers, location: object) -> QuotaManager:
    if getattr(location, "name", "") == "redis":
        pytest.skip("preemption is not implemented on the Redis backend")
    return await managers(config_quotas={"warehouse": 3}, preempt=["warehouse"])


async def fill(pm: QuotaManager, clock: FakeClock, priorities: list[int]) -> None:
    for i, priority in enumerate(priorities):
        assert (await pm.allocate(f"t{i}", WH, holder(f"x{i}", priority))).granted
        clock.advance(1)  # grants in order: t0 oldest


async def test_victims_are_the_lowest_priority_then_the_most_recent(
    pm: QuotaManager, clock: FakeClock
) -> None:
    await fill(pm, clock, [1, 1, 2])

    result = await pm.allocate("hi", WH, holder("xh", 5))

    assert not result.granted
    assert [v.token for v in result.preempting] == ["t1"]  # priority 1, granted after t0
    [victim] = await pm.preempted("t1", ["warehouse"])
    assert victim.preempter == "hi" and victim.preempter_priority == 5
    assert victim.describe_preempter() == "xh/n1 (priority 5) in warehouse"
    assert await pm.preempted("t0", ["warehouse"]) == ()


async def test_equal_or_higher_priority_holders_are_never_preempted(
    pm: QuotaManager, clock: FakeClock
) -> None:
    await fill(pm, clock, [5, 6, 7])

    result = await pm.allocate("hi", WH, holder("xh", 5))

    assert not result.granted and result.preempting == ()
    for i in range(3):
        assert await pm.preempted(f"t{i}", ["warehouse"]) == ()


async def test_no_more_victims_than_needed_and_none_that_would_not_suffice(
    pm: QuotaManager, clock: FakeClock
) -> None:
    await fill(pm, clock, [1, 1, 1])

    two = await pm.allocate("hi", [Claim("warehouse", units=2)], holder("xh", 5))
    assert sorted(v.token for v in two.preempting) == ["t1", "t2"]  # the two most recent

    four_fail = await pm.allocate("h2", [Claim("warehouse", units=3)], holder("xg", 9))
    # t0 is the only unmarked lower-priority holder left: 1 unit of 3 would not suffice.
    assert four_fail.preempting == ()
    assert await pm.preempted("t0", ["warehouse"]) == ()


async def test_asking_again_marks_nothing_new(pm: QuotaManager, clock: FakeClock) -> None:
    await fill(pm, clock, [1, 1, 1])
    first = await pm.allocate("hi", WH, holder("xh", 5))
    clock.advance(1)
    again = await pm.allocate("hi", WH, holder("xh", 5))

    assert [v.token for v in first.preempting] == [v.token for v in again.preempting] == ["t2"]
    marked = [i for i in range(3) if await pm.preempted(f"t{i}", ["warehouse"])]
    assert marked == [2]


async def test_a_marked_holding_is_not_renewed_and_its_room_goes_to_the_preempter(
    pm: QuotaManager, clock: FakeClock
) -> None:
    await fill(pm, clock, [1, 1, 1])
    assert not (await pm.allocate("low", WH, holder("xl", 0))).granted  # an older waiter
    clock.advance(1)
    assert (await pm.allocate("hi", WH, holder("xh", 5))).preempting

    assert await pm.renew("t2", ["warehouse"]) == frozenset()  # its engine must stop it
    assert await pm.renew("t1", ["warehouse"]) == {"warehouse"}
    [snapshot] = await pm.describe("warehouse")
    assert snapshot.in_use == 3  # the victim keeps its units until it releases
    assert [w.token for w in snapshot.waiters] == ["hi", "low"]  # ahead of lower priority

    await pm.release("t2", ["warehouse"])
    assert not (await pm.allocate("low", WH, holder("xl", 0))).granted
    assert (await pm.allocate("hi", WH, holder("xh", 5))).granted


async def test_nothing_is_preempted_where_preemption_is_off(
    managers: Managers, location: object, clock: FakeClock
) -> None:
    if getattr(location, "name", "") == "redis":
        pytest.skip("preemption is not implemented on the Redis backend")
    pm = await managers(config_quotas={"warehouse": 1, "other": 1})
    assert (await pm.allocate("t0", WH, holder("x0", 0))).granted
    assert (await pm.allocate("hi", WH, holder("xh", 9))).preempting == ()

    await pm.set_preempt("warehouse", True)  # the operator turns it on, for every process
    assert pm.preempts("warehouse") and not pm.preempts("other")
    # t0 was granted before: its priority was not recorded, so it is never a victim.
    assert (await pm.allocate("hi", WH, holder("xh", 9))).preempting == ()
    assert (await pm.allocate("t0", WH, holder("x0", 0))).granted  # recorded now
    assert [v.token for v in (await pm.allocate("hi", WH, holder("xh", 9))).preempting] == ["t0"]


async def test_a_bad_flag_is_refused_naming_the_value(managers: Managers) -> None:
    with pytest.raises(InvalidArgumentError, match="''"):
        await managers(preempt=[""])


async def test_a_backend_without_preemption_refuses_the_flag(
    managers: Managers, location: object
) -> None:
    if getattr(location, "name", "") != "redis":
        pytest.skip("only Redis lacks preemption")
    with pytest.raises(InvalidArgumentError, match="does not support preemption"):
        await managers(preempt=["warehouse"])
    manager = await managers(config_quotas={"warehouse": 1})
    with pytest.raises(InvalidArgumentError, match="does not support preemption"):
        await manager.set_preempt("warehouse", True)
