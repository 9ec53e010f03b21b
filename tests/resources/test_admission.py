"""The admission rule itself (pure functions), beyond what the contract suite exercises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.resources.admission import Ask, Usage, admit, next_in_line

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
@given(quota=st.integers(1, 6), usage=usages(), queue=waiters())
def test_next_in_line_is_exactly_whom_admit_would_grant(
    quota: int, usage: Usage, queue: list[Ask]
) -> None:
    ready = next_in_line(quota, usage, queue)

    for waiter in queue:
        others = [w for w in queue if w.token != waiter.token]
        fits = not admit(quota, usage, others, waiter).scope
        assert fits == (waiter.token in ready), waiter


def test_next_in_line_is_in_rank_order() -> None:
    late = Ask("a-late", "foo", "dev", 1, None, None, 0, 2.0)
    early = Ask("z-early", "foo", "dev", 1, None, None, 0, 1.0)

    assert next_in_line(5, Usage(), [late, early]) == ("z-early", "a-late")
