"""Contract: renewing only what is really held, withdrawing waiters at once, and names with
`:` in them kept apart. Runs on every backend (see conftest.location)."""

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
GRANTED = AllocationStatus.GRANTED
Managers = Callable[..., Awaitable[QuotaManager]]


async def test_renewing_a_lease_that_lapsed_and_was_taken_is_not_held(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 1}, lease=10)
    assert (await manager.allocate("old", [Claim("hive")], ALICE)).granted
    clock.advance(10)
    assert (await manager.allocate("new", [Claim("hive")], ALICE)).granted

    assert await manager.renew("old", ["hive"]) == frozenset()
    [snapshot] = await manager.describe("hive")
    assert [h.token for h in snapshot.holders] == ["new"]
    assert await manager.renew("new", ["hive"]) == frozenset({"hive"})


async def test_renewing_a_lapsed_lease_does_not_revive_it(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 1}, lease=10)
    assert (await manager.allocate("old", [Claim("hive")], ALICE)).granted
    clock.advance(10.5)

    assert await manager.renew("old", ["hive"]) == frozenset()
    assert (await manager.allocate("new", [Claim("hive")], ALICE)).granted
    assert await manager.renew("old", ["hive"]) == frozenset()


async def test_a_waiter_entry_is_never_reported_as_held(
    managers: Managers, clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"hive": 1, "pool": 2}, lease=10)
    assert (await manager.allocate("owner", [Claim("hive")], ALICE)).granted
    assert not (await manager.allocate("waiter", [Claim("hive"), Claim("pool")], ALICE)).granted

    assert await manager.renew("waiter", ["hive", "pool"]) == frozenset()
    clock.advance(6)
    assert await manager.renew("waiter", ["hive", "pool"]) == frozenset()
    clock.advance(6)  # the renewed entries are still live, 12 s after the refusal
    [hive] = await manager.describe("hive")
    assert [w.token for w in hive.waiters] == ["waiter"]


async def test_releasing_a_waiting_token_withdraws_its_entries_at_once(
    managers: Managers,
) -> None:
    manager = await managers(config_quotas={"hive": 1, "pool": 1})
    assert (await manager.allocate("owner", [Claim("hive")], ALICE)).granted
    assert not (await manager.allocate("waiter", [Claim("hive"), Claim("pool")], ALICE)).granted

    await manager.release("waiter", ["hive", "pool"])

    assert all(not s.waiters for s in await manager.describe())
    assert (await manager.allocate("newcomer", [Claim("pool")], ALICE)).granted
    await manager.release("owner", ["hive"])
    assert (await manager.allocate("late", [Claim("hive")], ALICE)).granted


async def test_names_with_colons_never_share_keys(managers: Managers) -> None:
    # Each pair differs only in where a ":" splits the same characters.
    manager = await managers(config_quotas={"a:b": 1, "a": 1, "b": 1, "a:b:c": 1, "c": 1})
    capped = [Claim("a", constraints=ResourceConstraintsSpec(project_scope=1, namespace_scope=1))]
    assert (await manager.allocate("t", [Claim("a:b")], Holder("p", "d"))).granted
    assert (await manager.allocate("t:x", [Claim("a")], Holder("p:q", "d"))).granted
    assert (await manager.allocate("b:t", [Claim("b")], Holder("p", "q:d"))).granted
    assert (await manager.allocate("x", [Claim("a:b:c")], Holder("p", "d"))).granted
    assert (await manager.allocate("y", [Claim("c")], Holder("p", "d"))).granted
    released = [("t", "a:b"), ("t:x", "a"), ("b:t", "b"), ("x", "a:b:c"), ("y", "c")]
    for token, namespace in released:
        await manager.release(token, [namespace])

    by_name = {s.namespace: s for s in await manager.describe()}
    assert all(not s.holders and s.in_use == 0 for s in by_name.values())
    assert (await manager.allocate("p-1", capped, Holder("p", "q:d"))).granted
    assert (await manager.allocate("p-2", [Claim("b")], Holder("p:q", "d"))).granted
    refused = await manager.allocate("p-3", capped, Holder("p", "q:d"))
    assert not refused.granted
    assert (await manager.allocate("other", [Claim("a:b")], Holder("p:q", "d"))).granted


async def test_task_tokens_of_projects_and_executions_with_colons_never_collide(
    managers: Managers,
) -> None:
    manager = await managers(config_quotas={"hive:default": 2})
    # Each pair of holders composed the same stored token before names were escaped.
    pairs = [
        (Holder("a:b", "c", "x1"), Holder("a", "b:c", "x1")),
        (Holder("p", "d", "x-y"), Holder("p", "d", "x")),
    ]
    tokens = ["job", "y-job"]
    for (first, second), token in zip(pairs, tokens, strict=True):
        one, two = manager.for_task("hive", first), manager.for_task("hive", second)
        assert await one.allocate_resource("default", "job") is GRANTED
        assert await two.allocate_resource("default", token) is GRANTED
        [snapshot] = await manager.describe("hive:default")
        assert snapshot.in_use == 2
        await one.release_resource("default", "job")
        [snapshot] = await manager.describe("hive:default")
        assert snapshot.in_use == 1
        await two.release_resource("default", token)
