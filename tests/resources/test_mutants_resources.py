"""Tests written to kill surviving mutants of the resource manager (docs/mutation.md): the
precedence of quota sources, and the wake-up of a refused waiter after a sweep ran during
its wait. In process, on the memory backend and a fake clock."""

from __future__ import annotations

import pytest

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager
from sluice.resources.admission import Ask, Usage, admit, effective_quota, next_in_line
from sluice.resources.backends.memory import MemoryBackend

ALICE = Holder("foo", "dev", "x1", "n1")


def ask(
    token: str,
    *,
    project: str = "foo",
    units: int = 1,
    project_cap: int | None = None,
    domain_cap: int | None = None,
    since: float = 1.0,
) -> Ask:
    return Ask(token, project, "dev", units, project_cap, domain_cap, 0, since)


def used(*holders: tuple[str, int]) -> Usage:
    usage = Usage()
    for project, units in holders:
        usage.add(project, "dev", units)
    return usage


def test_usage_adds_up_every_holder_of_a_project() -> None:
    usage = used(("foo", 1), ("foo", 2), ("bar", 1))
    assert (usage.total, usage.by_project["foo"], usage.by_domain[("foo", "dev")]) == (4, 3, 3)
    verdict = admit(10, usage, [], ask("new", project_cap=3, since=5.0), now=5.0)
    assert (verdict.scope, verdict.in_use, verdict.limit) == ("project", 3, 3)


def test_every_older_waiter_that_fits_sets_its_units_aside() -> None:
    waiters = [ask("w1"), ask("w2", since=2.0)]
    verdict = admit(3, Usage(), waiters, ask("new", units=2, since=5.0), now=5.0)
    assert (verdict.scope, verdict.position) == ("global", 3)
    assert next_in_line(3, Usage(), [*waiters, ask("new", units=2, since=5.0)], 5.0) == (
        "w1",
        "w2",
    )


def test_older_waiters_set_units_aside_under_their_project_cap() -> None:
    waiters = [ask("w1", project_cap=2), ask("w2", project_cap=2, since=2.0)]
    verdict = admit(10, Usage(), waiters, ask("new", project_cap=2, since=5.0), now=5.0)
    assert (verdict.scope, verdict.in_use, verdict.limit) == ("project", 0, 2)


def test_older_waiters_set_units_aside_under_their_domain_cap() -> None:
    waiters = [ask("w1", domain_cap=2), ask("w2", domain_cap=2, since=2.0)]
    verdict = admit(10, Usage(), waiters, ask("new", domain_cap=2, since=5.0), now=5.0)
    assert (verdict.scope, verdict.in_use, verdict.limit) == ("namespace", 0, 2)


def test_a_waiter_blocked_by_its_project_cap_holds_nothing_back_from_other_projects() -> None:
    usage = used(("foo", 1))
    capped = ask("capped", project_cap=1)
    for now in (5.0, 1.0 + 1e6):  # overdue or not
        verdict = admit(3, usage, [capped], ask("other", project="bar", units=2, since=5.0), now)
        assert verdict.scope == ""


@pytest.mark.parametrize(
    ("sources", "claim_default", "expected"),
    [
        ({"operator": 1, "config": 2, "plugin": 3, "default": 4}, 9, (1, "operator")),
        ({"config": 2, "plugin": 3, "default": 4}, 9, (2, "config")),
        ({"plugin": 3, "default": 4}, 9, (3, "plugin")),
        ({"default": 4}, 9, (9, "default")),
        ({"default": 4}, None, (4, "default")),
        ({}, 2, (2, "default")),
        ({}, None, (None, None)),
    ],
)
def test_the_claims_default_quota_wins_over_a_stored_default_only(
    sources: dict[str, int], claim_default: int | None, expected: tuple[int | None, str | None]
) -> None:
    assert effective_quota(sources, claim_default) == expected  # type: ignore[arg-type]


async def test_a_waiter_refused_before_a_sweep_is_still_woken_when_it_fits() -> None:
    clock = FakeClock()
    manager = QuotaManager(
        MemoryBackend(), clock=clock, lease=30.0, config_quotas={"q": 1}, sweep_interval=1e6
    )
    await manager.start()
    try:
        ready: list[tuple[str, tuple[str, ...] | None]] = []
        manager.subscribe_ready(lambda namespace, tokens: ready.append((namespace, tokens)))
        assert (await manager.allocate("holder", [Claim("q")], ALICE)).granted
        assert not (await manager.allocate("waiter", [Claim("q")], ALICE)).granted
        clock.advance(10.0)  # well within the waiter's lease
        await manager.sweep()

        await manager.release("holder", ["q"])

        assert ready == [("q", ("waiter",))]
    finally:
        await manager.close()
