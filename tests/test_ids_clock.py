"""Identifiers and clocks."""

from __future__ import annotations

import asyncio
import os
import re
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sluice.ids as ids
from sluice.clock import FakeClock, SystemClock
from sluice.ids import fit_name, instance_pid, new_execution_id, new_instance_id

# --- fit_name ----------------------------------------------------------------------------------


def test_fit_name_keeps_a_name_that_fits() -> None:
    assert fit_name("exec-node-0", 0, 63) == "exec-node-0"
    assert fit_name("abcd", 4, 4) == "abcd"


def test_fit_name_pads_a_short_name_with_zeros() -> None:
    assert fit_name("ab", 5, 10) == "ab000"


def test_fit_name_hashes_a_long_name_keeping_a_readable_prefix() -> None:
    name = "x" * 40 + "-node-attempt-3"
    fitted = fit_name(name, 0, 30)
    assert len(fitted) == 30
    assert fitted.startswith("x" * 19 + "-")
    assert re.fullmatch(r"[0-9a-f]{10}", fitted[-10:])
    assert fit_name(name, 0, 30) == fitted  # deterministic


def test_fit_name_with_a_tiny_maximum_is_all_hash() -> None:
    fitted = fit_name("a-rather-long-generated-name", 0, 8)
    assert len(fitted) == 8
    assert fitted[0].isalpha()  # a name must not start with a digit (DNS-1123 labels)


def test_fit_name_refuses_min_above_max() -> None:
    with pytest.raises(ValueError, match="min_length 9"):
        fit_name("abc", 9, 8)


@st.composite
def bounds(draw: st.DrawFn) -> tuple[int, int]:
    low = draw(st.integers(min_value=0, max_value=40))
    return low, draw(st.integers(min_value=max(low, 1), max_value=80))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120), bounds())
def test_fit_name_length_is_always_within_bounds(name: str, limits: tuple[int, int]) -> None:
    low, high = limits
    assert low <= len(fit_name(name, low, high)) <= high


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=100), min_size=2, max_size=2, unique=True),
    st.integers(min_value=8, max_value=63),
)
def test_distinct_long_names_stay_distinct(names: list[str], high: int) -> None:
    first, second = (name + "-" * (high + 1) for name in names)  # both too long for `high`
    assert fit_name(first, 0, high) != fit_name(second, 0, high)


def test_names_differing_only_at_the_end_stay_distinct() -> None:
    base = "execution-0123456789-node-with-a-very-long-name-attempt-"
    fitted = {fit_name(f"{base}{i}", 0, 40) for i in range(100)}
    assert len(fitted) == 100


# --- ids ---------------------------------------------------------------------------------------


def test_execution_id_shape() -> None:
    for _ in range(100):
        execution_id = new_execution_id()
        assert len(execution_id) == 20
        assert re.fullmatch(r"x[0-9a-hjkmnp-tv-z]{19}", execution_id), execution_id


def test_execution_ids_sort_by_creation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    moments = iter([1_700_000_000.000, 1_700_000_000.001, 1_700_000_001.5, 1_800_000_000.0])
    monkeypatch.setattr(ids.time, "time", lambda: next(moments))
    made = [new_execution_id() for _ in range(4)]
    assert made == sorted(made)
    assert len(set(made)) == 4


def test_execution_ids_are_unique() -> None:
    assert len({new_execution_id() for _ in range(10_000)}) == 10_000


def test_instance_id_names_role_host_and_pid() -> None:
    instance = new_instance_id("engine")
    assert instance.startswith(f"engine:{socket.gethostname()}:{os.getpid()}:")
    assert instance_pid(instance) == (socket.gethostname(), os.getpid())
    assert new_instance_id("engine") != instance  # randomness against pid reuse


@pytest.mark.parametrize("text", ["", "engine", "engine:host:notapid:ab", "a:b:1"])
def test_instance_pid_of_something_else_is_none(text: str) -> None:
    assert instance_pid(text) is None


# --- clocks ------------------------------------------------------------------------------------


async def test_fake_clock_sleepers_wake_when_time_passes_them() -> None:
    clock = FakeClock(start=100.0)
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [
        asyncio.create_task(sleeper("late", 10)),
        asyncio.create_task(sleeper("early", 5)),
        asyncio.create_task(sleeper("also-early", 5)),
    ]
    await asyncio.sleep(0)  # let them all start sleeping
    assert clock.now() == 100.0
    clock.advance(4.999)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(0.001)
    await asyncio.sleep(0)
    assert woke == ["early", "also-early"]  # in the order they went to sleep
    assert clock.now() == 105.0
    clock.advance(60)
    await asyncio.gather(*tasks)
    assert woke == ["early", "also-early", "late"]
    assert clock.now() == 165.0


async def test_fake_clock_sleep_of_zero_or_less_returns_at_once() -> None:
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), 5)
    await asyncio.wait_for(clock.sleep(-3), 5)
    assert clock.now() == 1_700_000_000.0


async def test_fake_clock_cancelled_sleeper_does_not_break_advance() -> None:
    clock = FakeClock()
    cancelled = asyncio.create_task(clock.sleep(1))
    kept = asyncio.create_task(clock.sleep(2))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    clock.advance(5)
    await asyncio.wait_for(kept, 5)


async def test_system_clock() -> None:
    import time

    clock = SystemClock()
    before = time.time()
    assert before <= clock.now() <= time.time()
    await asyncio.wait_for(clock.sleep(-1), 5)
    await asyncio.wait_for(clock.sleep(0.001), 5)
