"""start_call: inline calls end in the caller's task (no task, so anyio-style scopes tied to
the current task stay valid); other calls are tasks given one loop turn."""

from __future__ import annotations

import asyncio

import pytest

from sluice.engine.calls import start_call


async def test_an_inline_call_runs_in_the_caller_s_task() -> None:
    caller = asyncio.current_task()

    async def call() -> asyncio.Task[object] | None:
        await asyncio.sleep(0)
        return asyncio.current_task()

    future = await start_call(call(), inline=True)
    assert future.done() and future.result() is caller


async def test_an_inline_call_s_exception_is_its_future_s() -> None:
    async def call() -> None:
        raise ValueError("bad value 3")

    future = await start_call(call(), inline=True)
    with pytest.raises(ValueError, match="bad value 3"):
        future.result()


async def test_a_call_ending_in_its_first_step_is_done_after_one_turn() -> None:
    async def call() -> int:
        return 1

    future = await start_call(call(), inline=False)
    assert future.done() and future.result() == 1


async def test_a_slow_call_goes_on_in_its_task() -> None:
    caller = asyncio.current_task()

    async def call() -> bool:
        await asyncio.sleep(0.01)
        return asyncio.current_task() is not caller

    future = await start_call(call(), inline=False)
    assert not future.done()
    assert await future is True
