"""Contract: where quotas come from, changing them at runtime, and what describe shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sluice.clock import FakeClock
from sluice.errors import InvalidQuotaError
from sluice.resources import AllocationStatus, Claim, Holder, QuotaManager

ALICE = Holder("foo", "dev", "x1", "n1")
Managers = Callable[..., Awaitable[QuotaManager]]


async def test_plugin_quotas_are_namespaced_by_plugin(managers: Managers) -> None:
    manager = await managers(start=False)
    manager.registrar("hive").register_resource_quota("default", 1)
    await manager.start()  # registered quotas are stored when the manager starts

    assert (await manager.allocate("t1", [Claim("hive:default")], ALICE)).granted
    assert not (await manager.allocate("t2", [Claim("hive:default")], ALICE)).granted
    [snapshot] = await manager.describe("hive:default")
    assert (snapshot.quota, snapshot.quota_source) == (1, "plugin")


async def test_quotas_registered_after_start_apply_to_the_next_allocation(
    managers: Managers,
) -> None:
    manager = await managers()

    manager.registrar("hive").register_resource_quota("late", 1)

    assert (await manager.allocate("t1", [Claim("hive:late")], ALICE)).granted


async def test_config_wins_over_plugin_and_operator_wins_over_both(managers: Managers) -> None:
    manager = await managers(config_quotas={"hive:default": 2}, start=False)
    manager.registrar("hive").register_resource_quota("default", 5)
    await manager.start()
    [snapshot] = await manager.describe("hive:default")
    assert (snapshot.quota, snapshot.quota_source) == (2, "config")

    await manager.set_quota("hive:default", 3)

    [snapshot] = await manager.describe("hive:default")
    assert (snapshot.quota, snapshot.quota_source) == (3, "operator")
    assert snapshot.quotas == (("operator", 3), ("config", 2), ("plugin", 5))
    await manager.clear_quota("hive:default")
    assert (await manager.describe("hive:default"))[0].quota == 2


async def test_an_operator_quota_is_seen_by_every_manager(managers: Managers) -> None:
    first = await managers(config_quotas={"warehouse": 1})
    second = await managers(config_quotas={"warehouse": 1})

    await first.set_quota("warehouse", 2)

    assert (await second.allocate("t1", [Claim("warehouse")], ALICE)).granted
    assert (await second.allocate("t2", [Claim("warehouse")], ALICE)).granted


async def test_lowering_a_quota_never_revokes_held_tokens(manager: QuotaManager) -> None:
    await manager.allocate("t1", [Claim("warehouse")], ALICE)
    await manager.allocate("t2", [Claim("warehouse")], ALICE)

    await manager.set_quota("warehouse", 1)

    [snapshot] = await manager.describe("warehouse")
    assert (snapshot.in_use, {h.token for h in snapshot.holders}) == (2, {"t1", "t2"})
    assert (await manager.allocate("t1", [Claim("warehouse")], ALICE)).granted
    refused = await manager.allocate("t3", [Claim("warehouse")], ALICE)
    assert (refused.status, refused.in_use, refused.limit) == (AllocationStatus.EXHAUSTED, 2, 1)
    await manager.release("t1", ["warehouse"])
    assert not (await manager.allocate("t3", [Claim("warehouse")], ALICE)).granted
    await manager.release("t2", ["warehouse"])
    assert (await manager.allocate("t3", [Claim("warehouse")], ALICE)).granted


@pytest.mark.parametrize("quota", [0, -1, 1001, True, 2.5])
async def test_bad_quotas_are_errors_naming_the_value(manager: QuotaManager, quota: object) -> None:
    with pytest.raises(InvalidQuotaError, match=repr(quota).replace(".", r"\.")):
        await manager.set_quota("warehouse", quota)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuotaError, match="hive:default"):
        manager.registrar("hive").register_resource_quota("default", quota)  # type: ignore[arg-type]

    assert (await manager.describe("warehouse"))[0].quota == 2
    assert await manager.describe("hive:default") == []


async def test_bad_config_quotas_are_errors(managers: Managers) -> None:
    with pytest.raises(InvalidQuotaError, match="1001"):
        await managers(config_quotas={"warehouse": 1001})


async def test_max_quota_is_configurable(managers: Managers) -> None:
    manager = await managers(max_quota=5)

    with pytest.raises(InvalidQuotaError, match="from 1 to 5"):
        await manager.set_quota("warehouse", 6)


async def test_lock_namespaces_take_the_claims_default_and_are_forgotten_when_free(
    manager: QuotaManager,
) -> None:
    lock = [Claim("lock:db/partition/17", default_quota=1)]
    assert (await manager.allocate("t1", lock, ALICE)).granted
    assert not (await manager.allocate("t2", lock, ALICE)).granted
    [snapshot] = await manager.describe("lock:db/partition/17")
    assert (snapshot.quota, snapshot.quota_source, snapshot.in_use) == (1, "default", 1)

    await manager.release("t1", ["lock:db/partition/17"])
    await manager.release("t2", ["lock:db/partition/17"])

    assert await manager.describe("lock:db/partition/17") == []


async def test_a_stored_quota_wins_over_a_claims_default(manager: QuotaManager) -> None:
    await manager.set_quota("lock:hot", 2)

    await manager.allocate("t1", [Claim("lock:hot", default_quota=1)], ALICE)

    assert (await manager.allocate("t2", [Claim("lock:hot", default_quota=1)], ALICE)).granted


async def test_describe_shows_holders_and_ranked_waiters(
    manager: QuotaManager, clock: FakeClock
) -> None:
    await manager.allocate("t1", [Claim("warehouse", units=2)], Holder("foo", "dev", "x1", "n1"))
    clock.advance(1)
    await manager.allocate("t2", [Claim("warehouse")], Holder("bar", "prod", "x2", "n2"))
    clock.advance(1)
    await manager.allocate("t3", [Claim("warehouse")], Holder("baz", "dev", "x3", "n3"))

    [snapshot] = await manager.describe("warehouse")

    [holder] = snapshot.holders
    start = clock.now() - 2
    assert (holder.token, holder.execution_id, holder.node_id, holder.units) == (
        "t1",
        "x1",
        "n1",
        2,
    )
    assert (holder.since, holder.lease_expires_at) == (start, start + manager.lease)
    waiters = [
        (w.position, w.token, w.execution_id, w.since, w.blocking_scope) for w in snapshot.waiters
    ]
    assert waiters == [(1, "t2", "x2", start + 1, "global"), (2, "t3", "x3", start + 2, "global")]
    assert [s.namespace for s in await manager.describe()] == ["warehouse"]
