"""Contract: a release (or a reclaimed lease, or a raised quota) wakes the waiters at once:
subscribers of this manager synchronously, other managers (processes) through the backend;
and only where a claim the manager saw refused would now be granted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager

ALICE = Holder("foo", "dev", "x1", "n1")
Managers = Callable[..., Awaitable[QuotaManager]]
# Generous on purpose: a bound on liveness, not a timing assertion.
DELIVERY_DEADLINE = 20.0


async def woken_with(events: asyncio.Queue[str], namespace: str) -> bool:
    async def next_match() -> None:
        while await events.get() != namespace:
            pass

    await asyncio.wait_for(next_match(), DELIVERY_DEADLINE)
    return True


async def test_a_release_wakes_this_managers_subscribers_at_once(manager: QuotaManager) -> None:
    woken: list[str] = []
    manager.subscribe(woken.append)
    for token in ("t1", "t2", "waiting"):
        await manager.allocate(token, [Claim("warehouse")], ALICE)

    await manager.release("t1", ["warehouse"])
    await manager.release("t1", ["warehouse"])  # nothing freed: nobody woken again

    assert woken == ["warehouse"]


async def test_with_nobody_queueing_a_release_wakes_every_subscriber(
    manager: QuotaManager,
) -> None:
    # e.g. engines that withdrew their claims to order lock waits themselves
    woken: list[str] = []
    manager.subscribe(woken.append)
    await manager.allocate("t1", [Claim("warehouse")], ALICE)

    await manager.release("t1", ["warehouse"])

    assert woken == ["warehouse"]


async def test_nobody_is_woken_when_no_waiter_can_use_the_room(manager: QuotaManager) -> None:
    woken: list[str] = []
    manager.subscribe(woken.append)
    await manager.allocate("t1", [Claim("warehouse")], ALICE)
    await manager.allocate("t2", [Claim("warehouse")], ALICE)
    await manager.allocate("big", [Claim("warehouse", units=2)], ALICE)

    await manager.release("t1", ["warehouse"])  # one unit free: not enough for "big"

    assert woken == []
    await manager.release("t2", ["warehouse"])
    assert woken == ["warehouse"]


async def test_raising_a_quota_wakes_subscribers(manager: QuotaManager) -> None:
    woken: list[str] = []
    manager.subscribe(woken.append)

    await manager.set_quota("warehouse", 3)

    assert woken == ["warehouse"]


async def test_unsubscribed_callbacks_are_not_called(manager: QuotaManager) -> None:
    woken: list[str] = []
    unsubscribe = manager.subscribe(woken.append)
    for token in ("t1", "t2", "waiting"):
        await manager.allocate(token, [Claim("warehouse")], ALICE)

    unsubscribe()
    await manager.release("t1", ["warehouse"])

    assert woken == []


async def test_a_failing_subscriber_does_not_stop_the_others(manager: QuotaManager) -> None:
    woken: list[str] = []

    def broken(namespace: str) -> None:
        raise RuntimeError(f"subscriber bug on {namespace}")

    manager.subscribe(broken)
    manager.subscribe(woken.append)
    for token in ("t1", "t2", "waiting"):
        await manager.allocate(token, [Claim("warehouse")], ALICE)

    await manager.release("t1", ["warehouse"])

    assert woken == ["warehouse"]


async def test_a_release_in_another_process_wakes_only_processes_with_a_ready_waiter(
    shared_managers: Managers, clock: FakeClock
) -> None:
    waiter, bystander, other = [
        await shared_managers(config_quotas={"warehouse": 1}) for _ in range(3)
    ]
    waiter_events: asyncio.Queue[str] = asyncio.Queue()
    bystander_events: asyncio.Queue[str] = asyncio.Queue()
    waiter.subscribe(waiter_events.put_nowait)
    bystander.subscribe(bystander_events.put_nowait)
    await other.allocate("t1", [Claim("warehouse")], ALICE)
    assert not (await waiter.allocate("older", [Claim("warehouse")], ALICE)).granted
    clock.advance(1)
    assert not (await bystander.allocate("newer", [Claim("warehouse")], ALICE)).granted

    await other.release("t1", ["warehouse"])  # "older" is next in line, not "newer"

    assert await woken_with(waiter_events, "warehouse")
    assert (await waiter.allocate("older", [Claim("warehouse")], ALICE)).granted
    await other.release("older", ["warehouse"])  # now "newer" is
    # Wake-ups arrive in order, so the bystander's first one is this second release's.
    assert await woken_with(bystander_events, "warehouse")
    assert bystander_events.empty()


async def test_a_lease_reclaimed_in_another_process_wakes_this_one(
    shared_managers: Managers, clock: FakeClock
) -> None:
    waiter = await shared_managers(config_quotas={"warehouse": 1})
    sweeper = await shared_managers(config_quotas={"warehouse": 1})
    events: asyncio.Queue[str] = asyncio.Queue()
    waiter.subscribe(events.put_nowait)
    await sweeper.allocate("crashed", [Claim("warehouse")], ALICE)
    clock.advance(20)
    assert not (await waiter.allocate("t2", [Claim("warehouse")], ALICE)).granted
    clock.advance(10)

    assert await sweeper.sweep() == ("warehouse",)

    assert await woken_with(events, "warehouse")


async def test_with_nobody_queueing_a_release_elsewhere_wakes_every_process(
    shared_managers: Managers,
) -> None:
    listener = await shared_managers(config_quotas={"warehouse": 1})
    other = await shared_managers(config_quotas={"warehouse": 1})
    events: asyncio.Queue[str] = asyncio.Queue()
    listener.subscribe(events.put_nowait)
    await other.allocate("t1", [Claim("warehouse")], ALICE)

    await other.release("t1", ["warehouse"])

    assert await woken_with(events, "warehouse")
