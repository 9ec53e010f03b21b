"""The rate limit contract, written once and run on memory, SQLite, PostgreSQL and Redis: the
GCRA window bound, fair order and positions, all-or-nothing claims, idempotent tokens,
withdrawals and lapses, rule sources, idle keys, and the store's own clock."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from sluice.clock import FakeClock
from sluice.errors import RateLimitNeverFitsError, UnknownRateLimitError
from sluice.resources.ratelimit import Asker, RateClaim, RateLimitRule, RateLimits

LimitsFactory = Callable[..., Awaitable[RateLimits]]
OPENAI = [RateClaim("openai", "acme")]


def most_in_a_window(times: list[float], period: float) -> int:
    """The most admissions any half-open window [t, t + period) holds."""
    times = sorted(times)
    best, start = 0, 0
    for end in range(len(times)):
        while times[end] - times[start] >= period - 1e-9:
            start += 1
        best = max(best, end - start + 1)
    return best


async def test_no_window_of_the_period_holds_more_than_the_limit(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "10/s, burst 4"})
    admitted: list[float] = []
    for _ in range(120):  # five callers asking every 0.05 s for 6 s
        for caller in range(5):
            token = f"c{caller}-{len(admitted)}"
            if (await limits.admit(OPENAI, token, remember=0)).granted:
                admitted.append(clock.now())
            await limits.withdraw(OPENAI, token)
        clock.advance(0.05)
    assert admitted[:4] == [admitted[0]] * 4  # the burst went at once
    assert most_in_a_window(admitted, 1.0) == 10
    # sustained pace (10 - 4 + 1) per second after the burst: 4 + 7 * 6 s, give or take one
    assert 4 + 7 * 5 <= len(admitted) <= 4 + 7 * 6 + 1


async def test_a_refusal_names_the_slot_and_the_place_in_line(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "60/min"})
    assert (await limits.admit(OPENAI, "first")).granted
    second = await limits.admit(OPENAI, "second")
    third = await limits.admit(OPENAI, "third")
    assert not second.granted
    assert (second.name, second.key, second.position) == ("openai", "acme", 1)
    assert second.wait == pytest.approx(1.0)
    assert third.reason() == "rate-limited on openai/acme: next slot in 2.0 s, position 2"
    clock.advance(1.0)
    newcomer = await limits.admit(OPENAI, "newcomer")
    assert not newcomer.granted and newcomer.position == 3  # no overtaking the waiters
    assert (await limits.admit(OPENAI, "second")).granted
    assert not (await limits.admit(OPENAI, "third")).granted
    clock.advance(1.0)
    assert (await limits.admit(OPENAI, "third")).granted


async def test_keys_have_budgets_of_their_own(limits_factory: LimitsFactory) -> None:
    limits = await limits_factory({"openai": "1/hour"})
    assert (await limits.admit([RateClaim("openai", "acme")], "a")).granted
    assert (await limits.admit([RateClaim("openai", "globex")], "b")).granted
    assert (await limits.admit([RateClaim("openai")], "c")).granted
    refused = await limits.admit([RateClaim("openai", "acme")], "d")
    assert refused.reason().startswith("rate-limited on openai/acme: next slot in 3600 s")


async def test_units_take_that_many_slots(limits_factory: LimitsFactory, clock: FakeClock) -> None:
    limits = await limits_factory({"tokens": "10/s, burst 10"})
    assert (await limits.admit([RateClaim("tokens", "", 6)], "big")).granted
    refused = await limits.admit([RateClaim("tokens", "", 6)], "again")
    assert not refused.granted
    assert (await limits.admit([RateClaim("tokens", "", 4)], "rest", remember=0)).granted is False
    clock.advance(refused.wait)
    assert (await limits.admit([RateClaim("tokens", "", 6)], "again")).granted


async def test_all_claims_or_none(limits_factory: LimitsFactory) -> None:
    limits = await limits_factory({"openai": "1/hour", "search": "1/hour"})
    assert (await limits.admit([RateClaim("search")], "s")).granted
    both = [RateClaim("openai", "acme"), RateClaim("search")]
    refused = await limits.admit(both, "both")
    assert (refused.granted, refused.name) == (False, "search")
    await limits.withdraw(both, "both")
    assert (await limits.admit(OPENAI, "alone")).granted  # "openai/acme" was not spent


async def test_a_token_is_admitted_once_however_often_it_asks(
    limits_factory: LimitsFactory,
) -> None:
    first = await limits_factory({"openai": "2/hour, burst 2"})
    other = await limits_factory()  # another process, same store
    granted = await first.admit(OPENAI, "task-1", Asker("x1", "n1"))
    again = await other.admit(OPENAI, "task-1", Asker("x1", "n1"))
    assert (granted.granted, granted.repeated, again.granted, again.repeated) == (
        True,
        False,
        True,
        True,
    )
    assert (await other.admit(OPENAI, "task-2")).granted  # the second unit was still there
    assert not (await first.admit(OPENAI, "task-3")).granted


async def test_grants_are_remembered_only_for_a_while(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "1/s"}, remember=5.0)
    assert (await limits.admit(OPENAI, "t")).granted
    clock.advance(6.0)
    again = await limits.admit(OPENAI, "t")
    assert (again.granted, again.repeated) == (True, False)  # counted anew


async def test_a_withdrawn_waiter_gives_up_its_place(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "1/s"})
    assert (await limits.admit(OPENAI, "holder")).granted
    assert (await limits.admit(OPENAI, "first")).position == 1
    assert (await limits.admit(OPENAI, "second")).position == 2
    await limits.withdraw(OPENAI, "first")
    assert (await limits.admit(OPENAI, "second")).position == 1
    clock.advance(1.0)
    assert (await limits.admit(OPENAI, "second")).granted


async def test_a_waiter_that_stops_asking_lapses(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "1/hour"}, recheck=10.0, grace=2.0)
    assert (await limits.admit(OPENAI, "holder")).granted
    assert (await limits.admit(OPENAI, "gone")).position == 1
    clock.advance(5.0)
    assert (await limits.admit(OPENAI, "stays")).position == 2
    clock.advance(7.5)  # "gone" was due back after 10 s, with 2 s of grace: it lapsed
    assert (await limits.admit(OPENAI, "stays")).position == 1
    [snapshot] = await limits.describe("openai")
    assert [w.token for w in snapshot.keys[0].waiters] == ["stays"]


async def test_bad_claims_are_refused_before_anything_is_written(
    limits_factory: LimitsFactory,
) -> None:
    limits = await limits_factory({"openai": "100/min"})
    with pytest.raises(UnknownRateLimitError, match="'search'"):
        await limits.admit([RateClaim("openai", "acme"), RateClaim("search")], "t")
    with pytest.raises(RateLimitNeverFitsError, match=r"at most 1 unit.*takes 2"):
        await limits.admit([RateClaim("openai", "acme", 2)], "t")
    [snapshot] = await limits.describe("openai")
    assert snapshot.keys == ()


async def test_rules_come_from_operator_then_config_then_plugin(
    limits_factory: LimitsFactory,
) -> None:
    limits = await limits_factory({"openai": "100/min"})
    limits.register_plugin_rule("openai", RateLimitRule.parse("5/s"))
    limits.register_plugin_rule("search", RateLimitRule.parse("5/s"))
    await limits.store_plugin_rules()
    await limits.set_rule("openai", RateLimitRule.parse("10/hour, burst 2"))
    shown = {s.name: s for s in await limits.describe()}
    assert (shown["openai"].source, shown["openai"].rule) == (
        "operator",
        RateLimitRule.parse("10/hour burst 2"),
    )
    assert [source for source, _ in shown["openai"].rules] == ["operator", "config", "plugin"]
    assert (shown["search"].source, shown["search"].rule.rate) == ("plugin", "5/s")  # type: ignore[union-attr]
    await limits.clear_rule("openai")
    [openai] = await limits.describe("openai")
    assert (openai.source, openai.rule.rate) == ("config", "100/min")  # type: ignore[union-attr]


async def test_a_raised_limit_helps_the_next_admission_at_once(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "1/hour"})
    assert (await limits.admit(OPENAI, "a")).granted
    assert not (await limits.admit(OPENAI, "b")).granted
    await limits.set_rule("openai", RateLimitRule.parse("10/s, burst 2"))
    # what the old limit owed (an hour) is forgiven beyond one full bucket of the new one: the
    # key is as if it had just spent its burst, and "b" waits one new interval (1/9 s)
    refused = await limits.admit(OPENAI, "b")
    assert refused.wait == pytest.approx(1 / 9)
    clock.advance(refused.wait)
    assert (await limits.admit(OPENAI, "b")).granted


async def test_ls_shows_keys_next_free_times_and_waiters(
    limits_factory: LimitsFactory, clock: FakeClock
) -> None:
    limits = await limits_factory({"openai": "2/min, burst 2"})
    start = clock.now()
    assert (await limits.admit(OPENAI, "a")).granted
    assert (await limits.admit(OPENAI, "b")).granted
    assert not (await limits.admit(OPENAI, "c", Asker("x3", "n3"))).granted
    assert (await limits.admit([RateClaim("openai", "globex")], "d")).granted
    [snapshot] = await limits.describe("openai")
    assert snapshot.now == start
    acme, globex = snapshot.keys
    assert (acme.key, acme.available, acme.next_free) == ("acme", 0, pytest.approx(start + 60))
    assert [(w.position, w.token, w.execution_id, w.node_id) for w in acme.waiters] == [
        (1, "c", "x3", "n3")
    ]
    assert (globex.key, globex.available, globex.waiters) == ("globex", 1, ())


async def test_idle_keys_are_forgotten(limits_factory: LimitsFactory, clock: FakeClock) -> None:
    limits = await limits_factory({"openai": "60/min, burst 5"}, remember=0)
    for n in range(50):
        await limits.admit([RateClaim("openai", f"customer-{n}")], f"t{n}")
    [busy] = await limits.describe("openai")
    assert len(busy.keys) == 50
    clock.advance(1.1)  # one interval (60/56 s) later each key is idle: its state equals none
    [idle] = await limits.describe("openai")
    assert idle.keys == ()
    await limits.sweep()
    assert (await limits.admit([RateClaim("openai", "customer-1")], "again")).granted


async def test_the_stores_own_clock_judges_when_no_clock_is_given(
    store_clock_factory: LimitsFactory,
) -> None:
    limits = await store_clock_factory({"openai": "1/s"})
    before = time.time()
    granted = await limits.admit(OPENAI, "a")
    refused = await limits.admit(OPENAI, "b")
    after = time.time()
    assert granted.granted and not refused.granted
    # every server here runs on this machine: its clock reads like ours
    assert before - 0.5 <= granted.now <= refused.now <= after + 0.5
    assert 0.0 < refused.wait <= 1.0 + 1e-6
