"""Contract: leases, renewal, reclaiming at allocation and by the sweeper."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager

ALICE = Holder("foo", "dev", "x1", "n1")
WAREHOUSE = [Claim("warehouse")]
Managers = Callable[..., Awaitable[QuotaManager]]


async def fill(manager: QuotaManager) -> None:
    assert (await manager.allocate("t1", WAREHOUSE, ALICE)).granted
    assert (await manager.allocate("t2", WAREHOUSE, ALICE)).granted


async def test_every_grant_carries_the_configured_lease(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await manager.allocate("t1", WAREHOUSE, ALICE)

    [snapshot] = await manager.describe("warehouse")

    assert snapshot.holders[0].lease_expires_at == clock.now() + 30.0


async def test_a_lapsed_lease_is_reclaimed_at_the_next_allocation(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await fill(manager)
    clock.advance(29.9)
    assert not (await manager.allocate("t3", WAREHOUSE, ALICE)).granted

    clock.advance(0.1)

    assert (await manager.allocate("t3", WAREHOUSE, ALICE)).granted
    [snapshot] = await manager.describe("warehouse")
    assert {h.token for h in snapshot.holders} == {"t3"}
    assert snapshot.in_use == 1


async def test_renew_keeps_live_holders_and_reports_where_they_hold(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await fill(manager)
    clock.advance(20)

    held = await manager.renew("t1", ["warehouse", "elsewhere"])

    assert held == {"warehouse"}
    clock.advance(20)
    assert (await manager.allocate("t3", WAREHOUSE, ALICE)).granted  # t2 lapsed, t1 did not
    assert not (await manager.allocate("t4", WAREHOUSE, ALICE)).granted


async def test_a_lapsed_lease_is_not_revived_by_renew(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await fill(manager)
    clock.advance(30)

    assert await manager.renew("t1", ["warehouse"]) == frozenset()
    assert (await manager.allocate("t3", WAREHOUSE, ALICE)).granted


async def test_allocating_a_held_token_renews_its_lease(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await fill(manager)
    clock.advance(20)

    assert (await manager.allocate("t1", WAREHOUSE, ALICE)).granted

    clock.advance(20)
    assert await manager.renew("t1", ["warehouse"]) == {"warehouse"}
    assert await manager.renew("t2", ["warehouse"]) == frozenset()


async def test_sweep_reclaims_lapsed_leases_everywhere(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await manager.set_quota("other", 1)
    await fill(manager)
    await manager.allocate("t9", [Claim("other")], ALICE)
    clock.advance(10)
    await manager.renew("t2", ["warehouse"])
    clock.advance(20)

    touched = await manager.sweep()

    assert set(touched) == {"warehouse", "other"}
    in_use = {s.namespace: s.in_use for s in await manager.describe()}
    assert in_use == {"warehouse": 1, "other": 0}
    assert await manager.sweep() == ()


async def test_the_background_sweeper_reclaims_without_any_allocation(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"warehouse": 2}, sweep_interval=5.0)
    woken: list[str] = []
    manager.subscribe(woken.append)
    await fill(manager)
    clock.advance(20.0)
    assert not (await manager.allocate("waiting", WAREHOUSE, ALICE)).granted

    clock.advance(10.0)  # the holders' leases end; the sleeping sweeper wakes
    await wait_until(lambda: bool(woken))

    assert woken == ["warehouse"]
    assert (await manager.describe("warehouse"))[0].in_use == 0


async def test_a_waiter_that_stops_asking_drops_out_after_a_lease(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await fill(manager)
    await manager.allocate("quitter", WAREHOUSE, ALICE)
    clock.advance(15)
    await manager.allocate("keeper", WAREHOUSE, ALICE)
    await manager.renew("t1", ["warehouse"])
    await manager.renew("t2", ["warehouse"])
    clock.advance(15)

    result = await manager.allocate("keeper", WAREHOUSE, ALICE)

    assert result.position == 1
    [snapshot] = await manager.describe("warehouse")
    assert [w.token for w in snapshot.waiters] == ["keeper"]


async def test_release_of_a_waiter_withdraws_its_claim(manager: QuotaManager) -> None:
    await fill(manager)
    await manager.allocate("w1", WAREHOUSE, ALICE)
    await manager.allocate("w2", WAREHOUSE, ALICE)

    await manager.release("w1", ["warehouse"])

    [snapshot] = await manager.describe("warehouse")
    assert [(w.position, w.token) for w in snapshot.waiters] == [(1, "w2")]


async def wait_until(condition: Callable[[], bool], rounds: int = 1000) -> None:
    """Let background tasks run until `condition()` holds (or give up quietly)."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0.005)
