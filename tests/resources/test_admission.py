"""The admission rule itself (pure functions), beyond what the contract suite exercises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.resources.admission import STARVATION_BOUND, Ask, Usage, admit, next_in_line

projects = st.sampled_from(["foo", "foobar"])
domains = st.sampled_from(["dev", "prod"])
caps = st.none() | st.integers(1, 4)


@st.composite
def waiters(draw: st.DrawFn) -> list[Ask]:
    count = draw(st.integers(0, 6))
    return [
        Ask(
            f"w{i}",
            draw(projects),
            draw(domains),
            draw(st.integers(1, 4)),
            draw(caps),
            draw(caps),
            draw(st.integers(0, 2)),
            float(draw(st.integers(0, 3))),
            draw(st.booleans()),
        )
        for i in range(count)
    ]


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    usage = Usage()
    for _ in range(draw(st.integers(0, 4))):
        usage.add(draw(projects), draw(domains), draw(st.integers(1, 2)))
    return usage


@settings(max_examples=500)
@given(
    quota=st.integers(1, 6),
    usage=usages(),
    queue=waiters(),
    now=st.sampled_from([3.0, STARVATION_BOUND + 1.5]),
)
def test_next_in_line_is_exactly_whom_admit_would_grant(
    quota: int, usage: Usage, queue: list[Ask], now: float
) -> None:
    ready = next_in_line(quota, usage, queue, now)

    for waiter in queue:
        others = [w for w in queue if w.token != waiter.token]
        fits = not admit(quota, usage, others, waiter, now).scope
        assert fits == (waiter.token in ready), waiter


def test_next_in_line_is_in_rank_order() -> None:
    late = Ask("a-late", "foo", "dev", 1, None, None, 0, 2.0)
    early = Ask("z-early", "foo", "dev", 1, None, None, 0, 1.0)

    assert next_in_line(5, Usage(), [late, early], 3.0) == ("z-early", "a-late")


def ask(
    token: str, units: int = 1, since: float = 1.0, elsewhere: bool = False, here: bool = True
) -> Ask:
    return Ask(token, "foo", "dev", units, None, None, 0, since, elsewhere, here)


def test_a_waiter_blocked_by_another_namespace_sets_none_aside_until_overdue() -> None:
    usage = Usage()
    usage.add("foo", "dev", 1)
    newcomer = ask("new", since=5.0)
    fitted_here = ask("fitted-here", elsewhere=True, here=False)
    too_big_now = ask("refused-here-too", units=2, elsewhere=True)

    for waiter in (fitted_here, too_big_now):
        assert not admit(2, usage, [waiter], newcomer, now=5.0).scope
        overdue = admit(2, usage, [waiter], newcomer, now=1.0 + STARVATION_BOUND)
        assert (overdue.scope, overdue.position) == ("global", 2)


def test_a_waiter_refused_here_and_elsewhere_sets_room_aside_when_it_could_take_it_now() -> None:
    usage = Usage()
    usage.add("foo", "dev", 1)

    verdict = admit(2, usage, [ask("both", elsewhere=True)], ask("new", since=5.0), now=5.0)

    assert (verdict.scope, verdict.position) == ("global", 2)


def test_a_waiter_blocked_only_by_room_here_sets_its_units_aside_before_they_fit() -> None:
    usage = Usage()
    usage.add("foo", "dev", 1)

    verdict = admit(2, usage, [ask("big", units=2)], ask("new", since=5.0), now=5.0)

    assert (verdict.scope, verdict.in_use, verdict.limit, verdict.position) == ("global", 1, 2, 2)


def test_a_waiter_that_could_take_the_room_now_sets_it_aside() -> None:
    usage = Usage()
    usage.add("foo", "dev", 1)

    verdict = admit(2, usage, [ask("older")], ask("new", since=5.0), now=5.0)

    assert (verdict.scope, verdict.in_use, verdict.limit) == ("global", 1, 2)
