"""Contract: granting and refusing claims. Runs on every backend (see conftest.location)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sluice.errors import (
    ClaimExceedsQuotaError,
    InputError,
    InvalidArgumentError,
    InvalidQuotaError,
    UnknownNamespaceError,
)
from sluice.resources import (
    AllocationStatus,
    Claim,
    Holder,
    QuotaManager,
    ResourceConstraintsSpec,
)

GRANTED = AllocationStatus.GRANTED
EXHAUSTED = AllocationStatus.EXHAUSTED
CAPPED = AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
ALICE = Holder("foo", "dev", "x1", "n1")
WAREHOUSE = [Claim("warehouse")]
Managers = Callable[..., Awaitable[QuotaManager]]


def caps(project: int | None = None, domain: int | None = None) -> ResourceConstraintsSpec:
    return ResourceConstraintsSpec(project_scope=project, namespace_scope=domain)


async def in_use(manager: QuotaManager, namespace: str) -> int:
    snapshots = await manager.describe(namespace)
    return snapshots[0].in_use if snapshots else 0


async def test_grants_up_to_the_quota_then_exhausted(manager: QuotaManager) -> None:
    assert (await manager.allocate("t1", WAREHOUSE, ALICE)).status is GRANTED
    assert (await manager.allocate("t2", WAREHOUSE, ALICE)).status is GRANTED

    refused = await manager.allocate("t3", WAREHOUSE, ALICE)

    assert refused.status is EXHAUSTED
    assert (refused.namespace, refused.scope, refused.in_use, refused.limit) == (
        "warehouse",
        "global",
        2,
        2,
    )
    assert refused.reason() == "waiting for warehouse: 2/2 in use, position 1"


async def test_allocating_a_held_token_is_granted_and_not_counted_twice(
    manager: QuotaManager,
) -> None:
    await manager.allocate("t1", WAREHOUSE, ALICE)

    again = await manager.allocate("t1", WAREHOUSE, ALICE)

    assert again.status is GRANTED
    assert await in_use(manager, "warehouse") == 1
    assert (await manager.allocate("t2", WAREHOUSE, ALICE)).status is GRANTED


async def test_release_frees_the_units_and_is_idempotent(manager: QuotaManager) -> None:
    await manager.allocate("t1", [Claim("warehouse", units=2)], ALICE)

    await manager.release("t1", ["warehouse"])
    await manager.release("t1", ["warehouse"])
    await manager.release("never-held", ["warehouse", "no-such-namespace"])

    assert await in_use(manager, "warehouse") == 0
    assert (await manager.allocate("t2", [Claim("warehouse", units=2)], ALICE)).granted


async def test_multi_unit_claims_need_room_for_all_their_units(manager: QuotaManager) -> None:
    await manager.allocate("small", WAREHOUSE, ALICE)

    big = await manager.allocate("big", [Claim("warehouse", units=2)], ALICE)

    assert (big.status, big.in_use, big.limit) == (EXHAUSTED, 1, 2)
    await manager.release("small", ["warehouse"])
    assert (await manager.allocate("big", [Claim("warehouse", units=2)], ALICE)).granted
    assert await in_use(manager, "warehouse") == 2


async def test_project_cap_gives_namespace_quota_exceeded(managers: Managers) -> None:
    manager = await managers(config_quotas={"hive": 10})
    claim = [Claim("hive", constraints=caps(project=1))]
    await manager.allocate("t1", claim, ALICE)

    refused = await manager.allocate("t2", claim, ALICE)

    assert (refused.status, refused.scope, refused.in_use, refused.limit) == (
        CAPPED,
        "project",
        1,
        1,
    )
    assert refused.reason() == "waiting for hive: project cap 1/1 in use, position 1"


async def test_project_domain_cap_gives_namespace_quota_exceeded(managers: Managers) -> None:
    manager = await managers(config_quotas={"hive": 10})
    claim = [Claim("hive", constraints=caps(project=5, domain=1))]
    await manager.allocate("t1", claim, ALICE)

    refused = await manager.allocate("t2", claim, ALICE)
    other_domain = await manager.allocate("t3", claim, Holder("foo", "prod"))

    assert (refused.status, refused.scope) == (CAPPED, "namespace")
    assert "project/domain cap 1/1" in refused.reason()
    assert other_domain.granted


async def test_scopes_match_projects_exactly(managers: Managers) -> None:
    manager = await managers(config_quotas={"hive": 10})
    claim = [Claim("hive", constraints=caps(project=2, domain=1))]
    await manager.allocate("t1", claim, Holder("foo", "dev"))

    # Flyte's prefix match counts project "foo" against "foobar"; we must not.
    assert (await manager.allocate("t2", claim, Holder("foobar", "dev"))).granted
    assert (await manager.allocate("t3", claim, Holder("foo", "devel"))).granted
    assert not (await manager.allocate("t4", claim, Holder("foo", "dev"))).granted


async def test_global_exhaustion_wins_over_a_full_project_cap(manager: QuotaManager) -> None:
    claim = [Claim("warehouse", constraints=caps(project=2))]
    await manager.allocate("t1", claim, ALICE)
    await manager.allocate("t2", claim, ALICE)

    assert (await manager.allocate("t3", claim, ALICE)).status is EXHAUSTED


async def test_several_namespaces_are_claimed_all_or_nothing(managers: Managers) -> None:
    manager = await managers(config_quotas={"a": 1, "b": 1})
    await manager.allocate("holder-of-b", [Claim("b")], ALICE)

    refused = await manager.allocate("both", [Claim("a"), Claim("b")], ALICE)

    assert (refused.status, refused.namespace) == (EXHAUSTED, "b")
    assert await in_use(manager, "a") == 0
    await manager.release("holder-of-b", ["b"])
    assert (await manager.allocate("both", [Claim("a"), Claim("b")], ALICE)).granted
    assert (await in_use(manager, "a"), await in_use(manager, "b")) == (1, 1)
    await manager.release("both", ["a", "b"])
    assert (await in_use(manager, "a"), await in_use(manager, "b")) == (0, 0)


async def test_unknown_namespace_is_an_error_and_writes_nothing(manager: QuotaManager) -> None:
    with pytest.raises(UnknownNamespaceError, match="nowhere"):
        await manager.allocate("t1", [Claim("warehouse"), Claim("nowhere")], ALICE)

    assert await in_use(manager, "warehouse") == 0
    assert [s.namespace for s in await manager.describe()] == ["warehouse"]


@pytest.mark.parametrize(
    ("claim", "error", "named"),
    [
        (Claim("warehouse", units=0), InvalidQuotaError, "0"),
        (Claim("warehouse", units=-2), InvalidQuotaError, "-2"),
        (Claim("lock:x", default_quota=0), InvalidQuotaError, "0"),
        (Claim("lock:x", default_quota=1001), InvalidQuotaError, "1001"),
        (Claim(""), InvalidArgumentError, "''"),
    ],
)
async def test_bad_claims_are_errors_that_write_nothing(
    manager: QuotaManager, claim: Claim, error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        await manager.allocate("t1", [Claim("warehouse"), claim], ALICE)

    assert await in_use(manager, "warehouse") == 0


async def test_bad_constraints_are_errors_naming_the_value() -> None:
    with pytest.raises(InvalidQuotaError, match=r"project_scope.*0"):
        caps(project=0)
    with pytest.raises(InvalidQuotaError, match=r"namespace_scope.*-1"):
        caps(domain=-1)


async def test_a_namespace_claimed_twice_in_one_request_is_an_error(
    manager: QuotaManager,
) -> None:
    with pytest.raises(InvalidArgumentError, match="claimed twice"):
        await manager.allocate("t1", [Claim("warehouse"), Claim("warehouse")], ALICE)


async def test_a_claim_larger_than_the_quota_raises_and_writes_nothing(
    manager: QuotaManager,
) -> None:
    claims = [Claim("pool", default_quota=3), Claim("warehouse", units=5)]

    with pytest.raises(ClaimExceedsQuotaError) as caught:
        await manager.allocate("huge", claims, ALICE)

    assert isinstance(caught.value, InputError)
    assert (caught.value.namespace, caught.value.units, caught.value.quota) == ("warehouse", 5, 2)
    assert "5 unit(s) on 'warehouse' exceeds its quota of 2" in str(caught.value)
    assert all(not s.waiters and not s.holders for s in await manager.describe())
    assert [s.namespace for s in await manager.describe()] == ["warehouse"]


async def test_a_claim_too_big_for_an_operator_quota_raises(manager: QuotaManager) -> None:
    await manager.set_quota("warehouse", 4)
    assert (await manager.allocate("four", [Claim("warehouse", units=4)], ALICE)).granted
    await manager.set_quota("warehouse", 3)

    with pytest.raises(ClaimExceedsQuotaError, match="quota of 3"):
        await manager.allocate("again", [Claim("warehouse", units=4)], ALICE)
    [snapshot] = await manager.describe("warehouse")
    assert [h.token for h in snapshot.holders] == ["four"] and not snapshot.waiters


async def test_check_fits_refuses_a_claim_that_could_never_be_granted(
    manager: QuotaManager,
) -> None:
    await manager.check_fits([Claim("warehouse", units=2), Claim("lock:a", default_quota=1)])
    await manager.check_fits([Claim("not-registered-yet")])

    with pytest.raises(ClaimExceedsQuotaError, match="'warehouse'"):
        await manager.check_fits([Claim("warehouse", units=3)])
    with pytest.raises(ClaimExceedsQuotaError, match="'lock:b'"):
        await manager.check_fits([Claim("lock:b", units=2, default_quota=1)])
    assert [s.namespace for s in await manager.describe()] == ["warehouse"]


@pytest.mark.parametrize("capacity", [0, -1])
async def test_a_lock_of_capacity_below_one_is_an_error_naming_it(
    manager: QuotaManager, capacity: int
) -> None:
    lock = [Claim("lock:partition-7", default_quota=capacity)]

    for call in (manager.check_fits(lock), manager.allocate("t", lock, ALICE)):
        with pytest.raises(
            ClaimExceedsQuotaError, match=f"'lock:partition-7'.*quota of {capacity}"
        ):
            await call
    assert [s.namespace for s in await manager.describe()] == ["warehouse"]
