"""Contract: fencing of tokens across ownership epochs (`transfer`), and the store's clock.

A token's holder in a later ownership epoch takes over what its earlier epoch holds without
giving the room back; whatever the earlier epoch still sends in the old name (a renewal, a
release) then touches nothing. Run on memory, SQLite, PostgreSQL and Redis.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sluice.clock import FakeClock, SystemClock
from sluice.resources import Claim, Holder, QuotaManager

ALICE = Holder("foo", "dev", "x1", "n1")
BOB = Holder("foo", "dev", "x2", "n1")
WAREHOUSE = [Claim("warehouse")]
Managers = Callable[..., Awaitable[QuotaManager]]


async def holders(manager: QuotaManager) -> dict[str, float]:
    [snapshot] = await manager.describe("warehouse")
    return {h.token: h.lease_expires_at for h in snapshot.holders}


async def test_a_later_epoch_takes_over_the_grant_and_keeps_the_room(
    manager: QuotaManager, clock: FakeClock
) -> None:
    assert (await manager.allocate("t@1", WAREHOUSE, ALICE)).granted
    assert (await manager.allocate("u@1", WAREHOUSE, BOB)).granted  # quota 2: full
    clock.advance(10)

    moved = await manager.transfer("t@1", "t@2", ["warehouse", "elsewhere"])

    assert moved == {"warehouse"}
    assert await holders(manager) == {"t@2": clock.now() + 30.0, "u@1": clock.now() - 10 + 30.0}
    [snapshot] = await manager.describe("warehouse")
    assert snapshot.in_use == 2  # counted once, as before
    assert not (await manager.allocate("v@1", WAREHOUSE, BOB)).granted  # the room was kept


async def test_the_earlier_epoch_touches_nothing_after_a_transfer(manager: QuotaManager) -> None:
    assert (await manager.allocate("t@1", WAREHOUSE, ALICE)).granted
    assert await manager.transfer("t@1", "t@2", ["warehouse"]) == {"warehouse"}

    assert await manager.renew("t@1", ["warehouse"]) == frozenset()  # a stale renewal
    await manager.release("t@1", ["warehouse"])  # a stale release frees nothing

    assert set(await holders(manager)) == {"t@2"}
    assert await manager.renew("t@2", ["warehouse"]) == {"warehouse"}


async def test_a_lapsed_grant_is_not_transferred(manager: QuotaManager, clock: FakeClock) -> None:
    assert (await manager.allocate("t@1", WAREHOUSE, ALICE)).granted
    clock.advance(30)

    assert await manager.transfer("t@1", "t@2", ["warehouse"]) == frozenset()
    assert await manager.renew("t@2", ["warehouse"]) == frozenset()


async def test_transfer_is_idempotent_and_never_doubles_a_holding(manager: QuotaManager) -> None:
    assert (await manager.allocate("t@1", WAREHOUSE, ALICE)).granted
    assert (await manager.allocate("t@2", WAREHOUSE, ALICE)).granted  # both held (quota 2)

    assert await manager.transfer("t@1", "t@2", ["warehouse"]) == frozenset()
    assert await manager.transfer("t@9", "t@3", ["warehouse"]) == frozenset()  # nothing held
    assert set(await holders(manager)) == {"t@1", "t@2"}


async def test_production_leases_end_a_lease_after_the_stores_time(managers: Managers) -> None:
    """With the real clock the store reads its own time: the lease of a grant ends a lease
    after the store's clock, whatever the caller's; bounded here by the test's own reads of
    the wall clock around the call (the store is on this host)."""
    manager = await managers(clock=SystemClock(), config_quotas={"warehouse": 2}, lease=30.0)
    before = time.time()
    assert (await manager.allocate("t@1", WAREHOUSE, ALICE)).granted
    assert await manager.transfer("t@1", "t@2", ["warehouse"]) == {"warehouse"}
    after = time.time()

    [expiry] = (await holders(manager)).values()

    assert before + 30.0 - 1.0 <= expiry <= after + 30.0 + 1.0
