"""A background task that calls a sweep function every `interval` seconds of a clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock

log = logging.getLogger(__name__)


class Sweeper:
    """Runs `sweep` periodically until stopped; a failing sweep is logged and retried next
    round, because the store being briefly unreachable must not end the sweeping for good."""

    def __init__(
        self, sweep: Callable[[], Awaitable[object]], interval: float, clock: Clock
    ) -> None:
        self._sweep = sweep
        self._interval = interval
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start sweeping (idempotent); needs a running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="sluice-cache-sweeper"
            )

    async def stop(self) -> None:
        """Stop sweeping and wait for a sweep in progress to be cancelled (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await self._clock.sleep(self._interval)
            try:
                await self._sweep()
            except Exception:
                reraise_cancellation()
                log.warning("sweeping expired cache reservations failed", exc_info=True)
