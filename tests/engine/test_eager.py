"""start_eagerly: a coroutine's first step runs in the caller; one that suspends goes on in a
task exactly as it would have, cancellation included."""

from __future__ import annotations

import asyncio

import pytest

from sluice.engine.eager import start_eagerly


async def test_a_coroutine_ending_in_its_first_step_is_done_at_once() -> None:
    steps: list[str] = []

    async def quick() -> int:
        steps.append("ran")
        return 1

    future = start_eagerly(quick())
    assert steps == ["ran"] and future.done() and future.result() == 1


async def test_a_suspended_coroutine_goes_on_in_a_task() -> None:
    async def slow() -> int:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        return 2

    future = start_eagerly(slow())
    assert not future.done()
    assert await future == 2


async def test_an_exception_in_the_first_step_is_the_future_s() -> None:
    async def boom() -> None:
        raise ValueError("bad value 3")

    future = start_eagerly(boom())
    with pytest.raises(ValueError, match="bad value 3"):
        future.result()


async def test_cancelling_the_task_throws_into_the_coroutine() -> None:
    seen: list[str] = []

    async def hang() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    future = start_eagerly(hang())
    await asyncio.sleep(0)
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future
    assert seen == ["cancelled"]


async def test_a_value_sent_back_by_a_future_reaches_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[str] = loop.create_future()

    async def wait() -> str:
        return (await gate) + "!"

    future = start_eagerly(wait())
    loop.call_soon(gate.set_result, "ok")
    assert await future == "ok!"
