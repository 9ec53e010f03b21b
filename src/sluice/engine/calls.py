"""How the handler starts one plugin call: inline for a plugin whose calls return at once,
else as a task given one loop turn to end in its first step (most do)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def start_call(call: Awaitable[T], inline: bool) -> asyncio.Future[T]:
    """The call's future. `inline` (PluginProperties.inline_calls): awaited here, in the
    caller's task, to its end: no task, no loop turn, no timer. Otherwise a task, done on
    return if it ended in its first step (the caller bounds the rest)."""
    if not inline:
        task = asyncio.ensure_future(call)
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            task.cancel()
            raise
        return task
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    try:
        future.set_result(await call)
    except asyncio.CancelledError:
        raise  # the caller (a reconcile) was cancelled, not the call
    except Exception as exc:
        future.set_exception(exc)
    return future
