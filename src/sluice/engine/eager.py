"""Start a coroutine's first step at once, in the caller (Python 3.12's eager tasks, for 3.11).

Most plugin calls end in their first step: wrapping each in a task cost a loop turn (the task
runs at the next one) and a task object. `start_eagerly` runs the first step now; a coroutine
that ends there gives a future already done, one that suspends goes on in a task, resumed
exactly where it stopped (awaiting the same future).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(awaitable: Awaitable[T]) -> asyncio.Future[T]:
    """A future of the coroutine's result, done already if its first step ended it (any
    other awaitable: a task, as asyncio.ensure_future makes)."""
    if not isinstance(awaitable, types.CoroutineType):
        return asyncio.ensure_future(awaitable)
    coro: Coroutine[Any, Any, T] = awaitable
    loop = asyncio.get_running_loop()
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except asyncio.CancelledError:
        cancelled: asyncio.Future[T] = loop.create_future()
        cancelled.cancel()
        return cancelled
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_resume(coro, yielded))


@types.coroutine
def _resume(coro: Coroutine[Any, Any, T], yielded: Any) -> Generator[Any, Any, T]:
    """Drive a started coroutine as a task would: hand its awaited future to the task, then
    resume it (send None) or throw what the task throws (a cancellation) into it."""
    step: Callable[[], Any] | None = None
    while True:
        if step is not None:
            try:
                yielded = step()
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        try:
            yield yielded
        except BaseException as exc:  # forwarded into the coroutine
            step = _thrower(coro, exc)
        else:
            step = _sender(coro)


def _sender(coro: Coroutine[Any, Any, Any]) -> Callable[[], Any]:
    return lambda: coro.send(None)


def _thrower(coro: Coroutine[Any, Any, Any], exc: BaseException) -> Callable[[], Any]:
    return lambda: coro.throw(exc)
