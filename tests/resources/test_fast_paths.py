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
from sluice.resources.backends.base import AllocationRequest
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

    # One unit is free but an older waiter queues: only the general path ranks it (and sets
    # the unit aside for it, as it is blocked by room here alone).
    assert not (await manager.allocate("c", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])
    await manager.release("c", ["ns"])  # withdraws its waiter entry

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


async def test_a_woken_waiter_first_in_line_is_granted_in_one_call(
    managers: ManagerFactory,
    location: Location,
    general: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tried: list[tuple[str, str]] = []
    for name in ("try_grant", "try_grant_waiter"):
        original = getattr(pg_direct, name)

        async def spy(conn: Any, request: Any, _original: Any = original, _name: str = name) -> Any:
            tried.append((_name, request.token))
            return await _original(conn, request)

        monkeypatch.setattr(pg_direct, name, spy)
    manager = await managers(config_quotas={"ns": 1})
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    assert not (await manager.allocate("b", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])
    general.clear()

    assert (await manager.allocate("b", [claim()], HOLDER)).granted
    assert (await manager.allocate("c", [claim()], HOLDER)).status is AllocationStatus.EXHAUSTED
    shown = (await manager.describe("ns"))[0]

    # PostgreSQL: newcomers try the one-call grant; "b", waiting, the waiter's one-call grant,
    # which takes it (first in line) without the general path and drops its waiter entry.
    assert [h.token for h in shown.holders] == ["b"]
    assert [w.token for w in shown.waiters] == ["c"]
    if location.name == "postgresql":
        assert tried == [
            ("try_grant", "a"),
            ("try_grant", "b"),
            ("try_grant_waiter", "b"),
            ("try_grant", "c"),
        ]
        assert general == ["allocate"]  # c's refusal


async def test_a_waiter_behind_an_older_one_is_left_to_the_general_path(
    managers: ManagerFactory, general: list[str], clock: FakeClock, location: Location
) -> None:
    manager = await managers(config_quotas={"ns": 2})
    assert (await manager.allocate("a", [claim(units=2)], HOLDER)).granted
    assert not (await manager.allocate("big", [claim(units=2)], HOLDER)).granted
    clock.advance(1.0)
    assert not (await manager.allocate("small", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])
    general.clear()

    # "small" asks as a woken waiter would (a release elsewhere could have named it), but
    # "big" was refused before it and can take the room now: it must not be overtaken.
    backend = location.backend()
    await backend.open()
    try:
        request = AllocationRequest("small", (claim(),), HOLDER, clock.now(), 60.0, waiting=True)
        outcome = await backend.allocate(request)
    finally:
        await backend.close()

    assert outcome.result.status is AllocationStatus.EXHAUSTED
    assert general == ["allocate"]
    assert (await manager.allocate("big", [claim(units=2)], HOLDER)).granted


@pytest.mark.postgres
async def test_only_releases_commit_without_waiting_for_the_wal_flush(
    pg_upgraded_url: str, pg_url: str
) -> None:
    """A lost release withholds units until its lease lapses; a lost grant or renewal would
    over-grant (migration 0006). So the release's transaction, and only it, is asynchronous."""
    import psycopg

    async def setting(conn: Any) -> str:
        cursor = await conn.execute("SELECT current_setting('synchronous_commit')")
        row = await cursor.fetchone()
        return str(row[0])

    def asking(token: str, *, waiting: bool = False) -> AllocationRequest:
        return AllocationRequest(token, (claim(default=2),), HOLDER, 100.0, 60.0, waiting=waiting)

    seen: dict[str, str] = {}
    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    try:
        steps: dict[str, Any] = {
            "try_grant": lambda: pg_direct.try_grant(conn, asking("a")),
            "allocate": lambda: pg_direct.allocate(conn, asking("b")),
            "renew": lambda: pg_direct.extend_leases(conn, "a", ["ns"], 101.0, 60.0),
            "release": lambda: pg_direct.release(conn, "b", ["ns"], 102.0),
            "try_release": lambda: pg_direct.try_release(conn, "a", ["ns"], "resources", None),
        }
        for name, step in steps.items():
            async with conn.transaction():
                assert await step() is not None
                seen[name] = await setting(conn)
        seen["after"] = await setting(conn)
    finally:
        await conn.close()

    assert seen == {
        "try_grant": "on",
        "allocate": "on",
        "renew": "on",
        "release": "off",
        "try_release": "off",
        "after": "on",
    }


@pytest.mark.parametrize("location", SQL[1:], indirect=True)  # PostgreSQL's one-call release
async def test_a_release_where_this_process_saw_waiters_skips_the_one_call_release(
    managers: ManagerFactory, location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[str] = []
    original = pg_direct.try_release

    async def spy(conn: Any, token: str, *args: Any) -> Any:
        tried.append(token)
        return await original(conn, token, *args)

    monkeypatch.setattr(pg_direct, "try_release", spy)
    manager = await managers(config_quotas={"ns": 1})
    assert (await manager.allocate("a", [claim()], HOLDER)).granted
    assert not (await manager.allocate("b", [claim()], HOLDER)).granted
    await manager.release("a", ["ns"])  # "b" waits: the one-call release would decline
    assert (await manager.allocate("b", [claim()], HOLDER)).granted
    await manager.release("b", ["ns"])  # nobody waits any more

    assert tried == ["b"]


async def test_namespaces_with_array_syntax_in_their_names_take_the_fast_paths(
    managers: ManagerFactory, general: list[str]
) -> None:
    """PostgreSQL's one-call functions get their arrays as literals built in Python."""
    names = ['we"ird', "back\\slash", "com,ma {brace}", "NULL"]
    manager = await managers(config_quotas=dict.fromkeys(names, 1))
    claims = [Claim(name) for name in names]

    assert (await manager.allocate("a", claims, HOLDER)).granted
    shown = {s.namespace: s.in_use for s in await manager.describe()}
    await manager.release("a", names)

    assert general == []
    assert shown == dict.fromkeys(names, 1)
    assert {s.namespace: s.in_use for s in await manager.describe()} == dict.fromkeys(names, 0)
