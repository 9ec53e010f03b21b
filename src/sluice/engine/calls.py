"""How the handler starts and bounds one plugin call.

A call starts inline for a plugin whose calls return at once, else as a task given one loop
turn to end in its first step (most do). It is bounded by the time the handler allows it: an
overrun is cancelled and raises PluginCallTimeout; a call that swallows its cancellation is
abandoned (kept referenced and logged until it ends on its own), never awaited further."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
CANCEL_GRACE = 0.5
"""Seconds a cancelled plugin call gets to end before it is abandoned (it swallowed the
cancellation): the engine goes on without it."""


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


class PluginCallTimeout(Exception):
    """A plugin call overran its bound and was cancelled."""

    def __init__(self, method: str, seconds: float, by_task_timeout: bool) -> None:
        self.method = method
        self.seconds = seconds
        self.by_task_timeout = by_task_timeout
        bound = "the task's timeout" if by_task_timeout else "engine.plugin_call_timeout"
        super().__init__(f"{method}() did not return within {seconds:.3g}s ({bound}); cancelled")


class PluginCalls:
    """The plugin calls a handler abandoned, kept until they end."""

    def __init__(self) -> None:
        self.abandoned: set[asyncio.Future[Any]] = set()

    async def bounded(
        self,
        call: Callable[[], Awaitable[T]],
        method: str,
        limit: float,
        by_task: bool,
        inline: bool = False,
    ) -> T:
        """Run `call()` within `limit` seconds (`by_task`: the limit is the task's remaining
        timeout, else engine.plugin_call_timeout)."""
        if limit <= 0:
            raise PluginCallTimeout(method, 0.0, True)
        future: asyncio.Future[T] = await start_call(call(), inline)
        try:
            if future.done():  # most calls end in their first step: no timer for them
                return future.result()
            done, _ = await asyncio.wait({future}, timeout=limit)
        except asyncio.CancelledError:
            future.cancel()
            raise
        if future in done:
            return future.result()
        future.cancel()
        done, _ = await asyncio.wait({future}, timeout=CANCEL_GRACE)
        if future in done:
            if not future.cancelled():
                future.exception()  # retrieved: the timeout is what gets reported
        else:
            self.abandon(future, method)
        raise PluginCallTimeout(method, limit, by_task)

    def abandon(self, future: asyncio.Future[Any], method: str) -> None:
        """Cancel a plugin call and stop waiting for it; one that swallows its cancellation
        is kept referenced (and logged) until it ends on its own."""
        future.cancel()
        if future.done():
            return
        self.abandoned.add(future)
        future.add_done_callback(self.abandoned.discard)
        future.add_done_callback(lambda f: f.cancelled() or f.exception())

        def report() -> None:  # a cancelled task ends at its next step: judge after the grace
            if not future.done():
                log.error(
                    "plugin %s() did not end within %ss of its cancellation; abandoned",
                    method,
                    CANCEL_GRACE,
                )

        asyncio.get_running_loop().call_later(CANCEL_GRACE, report)
