"""Stopping background loops reliably."""

from __future__ import annotations

import asyncio


def reraise_cancellation() -> None:
    """Raise CancelledError if this task was asked to stop. A database driver cancelled in
    the middle of a query may raise its own error instead, which an `except Exception` would
    otherwise take for a failure to retry, and the task would never stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait at most `seconds` for `event`; True if it was set.

    Use this, not asyncio.wait_for, in loops that must stop when cancelled: on Python 3.11
    wait_for drops a cancellation that arrives as the awaited event fires, and the loop runs
    on forever (fixed in 3.12). asyncio.timeout does not.
    """
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await event.wait()
    except TimeoutError:
        return False
    return True
