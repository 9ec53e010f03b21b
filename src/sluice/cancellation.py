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
