"""The SQL backend's uncontended fast paths (SQLite: sql/lite_fast.py; PostgreSQL: migration
0005's functions): taken exactly when nobody waits, no lease lapsed, the token holds none of
the namespaces and the claim fits; any other case goes to the general path, which decides as
the contract suites say. The spies count how often the general path ran."""

from __future__ import annotations

from typing import Any

import pytest
from tests.resources.conftest import Location, ManagerFactory, location_for

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager, ResourceConstraintsSpec
from sluice.resources.backends.sql import lite, pg_direct
from sluice.resources.models import AllocationStatus

SQL = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
HOLDER = Holder("proj", "dev", "e1", "n1")


@pytest.fixture(params=SQL)
def location(request: pytest.FixtureRequest) -> Location:
    return location_for(request.param, request)


@pytest.fixture
def general(location: Location, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names the general path's allocations and releases as they run."""
    calls: list[str] = []
    module: Any = lite if location.name == "sqlite" else pg_direct
    for name in ("allocate", "release"):
        original = getattr(module, name)

        def spy(*args: Any, _original: Any = original, _name: str = name) -> Any:
            calls.append(_name)
            return _original(*args)

        if location.name == "sqlite" and name == "release":
            continue  # lite_fast.release is the only SQLite release; its branches are below
        monkeypatch.setattr(module, name, spy)
    return calls


def claim(units: int = 1, project_cap: int | None = None, default: int | None = None) -> Claim:
    caps = ResourceConstraintsSpec(project_scope=project_cap) if project_cap else None
    return Claim("ns", units=units, constraints=caps, default_quota=default)


async def test_an_uncontended_grant_and_release_skip_the_general_path(
    managers: ManagerFactory, general: list[str]
) -> None:
    manager = await managers(config_quotas={"ns": 3})

    for token in ("a", "b", "c"):
        assert (await manager.allocate(token, [claim(project_cap=3)], HOLDER)).granted
    snapshot = (await manager.describe("ns"))[0]
    for token in ("a", "b", "c"):
        await manager.release(token, ["ns"])

    assert general == []
    assert snapshot.in_use == 3
    assert [h.token for h in snapshot.holders] == ["a", "b", "c"]
    assert (await manager.describe("ns"))[0].in_use == 0


async def test_a_claim_over_a_cap_goes_to_the_general_path_and_is_refused(
    managers: ManagerFactory, general: list[str]
) -> None:
    manager = await managers(config_quotas={"ns": 5})
    assert (await manager.allocate("a", [claim(units=2, project_cap=3)], HOLDER)).granted

    result = await manager.allocate("b", [claim(units=2, project_cap=3)], HOLDER)

    assert general == ["allocate"]
    assert (result.status, result.scope, result.in_use, result.limit) == (
        AllocationStatus.NAMESPACE_QUOTA_EXCEEDED,
        "project",
        2,
        3,
    )


async def test_a_waiter_sends_newcomers_and_releases_to_the_general_path(
    managers: ManagerFactory, general: list[str], location: Location
) -> None:
    manager = await managers(config_quotas={"ns": 2})
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    assert not (await manager.allocate("big", [claim(units=2)], HOLDER)).granted
    general.clear()

    # One unit is free but an older waiter queues: only the general path ranks it.
    assert (await manager.allocate("c", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])
    await manager.release("c", ["ns"])

    expected = ["allocate"] if location.name == "sqlite" else ["allocate", "release", "release"]
    assert general == expected
    assert (await manager.allocate("big", [claim(units=2)], HOLDER)).granted


async def test_a_lapsed_lease_is_reclaimed_by_the_general_path(
    managers: ManagerFactory, general: list[str], clock: FakeClock
) -> None:
    manager = await managers(config_quotas={"ns": 1}, lease=10.0)
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    clock.advance(11.0)

    assert (await manager.allocate("b", [claim()], HOLDER)).granted

    assert general == ["allocate"]
    assert [h.token for h in (await manager.describe("ns"))[0].holders] == ["b"]


async def test_asking_again_while_holding_goes_to_the_general_path_and_counts_once(
    managers: ManagerFactory, general: list[str]
) -> None:
    manager = await managers(config_quotas={"ns": 2})
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    assert (await manager.allocate("a", [claim()], HOLDER)).granted

    assert general == ["allocate"]
    assert (await manager.describe("ns"))[0].in_use == 1


async def test_a_lock_default_is_stored_by_the_fast_path_and_forgotten_on_release(
    managers: ManagerFactory, general: list[str]
) -> None:
    manager: QuotaManager = await managers()
    assert (await manager.allocate("a", [claim(default=1)], HOLDER)).granted
    shown = (await manager.describe("ns"))[0]
    refused = await manager.allocate("b", [claim(default=1)], HOLDER)
    await manager.release("b", ["ns"])
    await manager.release("a", ["ns"])

    assert (shown.quota, shown.quota_source, shown.in_use) == (1, "default", 1)
    assert refused.status is AllocationStatus.EXHAUSTED
    assert general[0] == "allocate" and general.count("allocate") == 1
    assert await manager.describe("ns") == []


async def test_a_woken_waiter_goes_straight_to_the_general_path(
    managers: ManagerFactory, location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[str] = []
    original = pg_direct.try_grant

    async def spy(conn: Any, request: Any) -> Any:
        tried.append(request.token)
        return await original(conn, request)

    monkeypatch.setattr(pg_direct, "try_grant", spy)
    manager = await managers(config_quotas={"ns": 1})
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    assert not (await manager.allocate("b", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])

    assert (await manager.allocate("b", [claim()], HOLDER)).granted
    assert (await manager.allocate("c", [claim()], HOLDER)).status is AllocationStatus.EXHAUSTED

    # PostgreSQL tries the one-call grant for newcomers only: "b" at its first ask, not at its
    # second, when it had a waiter entry (the function would only decline).
    assert tried == ([] if location.name == "sqlite" else ["a", "b", "c"])
