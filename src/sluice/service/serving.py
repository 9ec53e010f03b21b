"""The long-running verbs: an engine (`sluice engine`) and a whole server (`sluice serve`:
the controller candidate, the schedules of ACTIVE launch plans and an engine)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from sluice.errors import StoreGoneError
from sluice.executions.backfill_runner import BackfillRunner
from sluice.executions.schedules import ScheduleRunner
from sluice.runtime import Runtime
from sluice.service.local import run_controller_candidate

Ready = Callable[[], None]
"""Called once everything asked for is running (the commands say so then)."""


def nothing() -> None:
    return None


async def run_engine(
    runtime: Runtime,
    stop: Awaitable[object],
    ready: Ready = nothing,
    hurry: asyncio.Event | None = None,
) -> StoreGoneError | None:
    """Claim and drive executions until `stop` completes (None) or the store is gone for good
    (its error). A `stop` drains the engine first: running attempts get
    `engine.drain_timeout` seconds to end, or until `hurry` completes (a second signal)."""
    engine = await runtime.engine()
    await engine.start()
    ready()
    try:
        fatal = await _until(stop, engine.wait_fatal())
        if fatal is None:
            await engine.drain(runtime.settings.engine.drain_timeout, hurry)
        return fatal
    finally:
        await engine.stop()


async def serve(
    runtime: Runtime,
    stop: Awaitable[object],
    *,
    engine: bool = True,
    schedules: bool = True,
    ready: Ready = nothing,
    hurry: asyncio.Event | None = None,
) -> StoreGoneError | None:
    """Lead (or stand by for) the controller, fire schedules, step backfills and, with
    `engine`, drive executions, until `stop` completes (None, after draining the engine, see
    run_engine) or the store is gone for good (its error)."""
    settings = runtime.settings
    runner = ScheduleRunner(runtime.store, runtime.notifier, runtime.clock, settings.concurrency)
    backfills = BackfillRunner(runtime.store, runtime.notifier, runtime.clock)
    async with run_controller_candidate(runtime, metrics=True):
        tasks = [asyncio.create_task(backfills.run(), name="sluice-backfills")]
        if schedules:
            tasks.append(asyncio.create_task(runner.run(), name="sluice-schedules"))
        try:
            if not engine:
                ready()
                await stop
                return None
            return await run_engine(runtime, stop, ready, hurry)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _until(
    stop: Awaitable[object], fatal: Awaitable[StoreGoneError]
) -> StoreGoneError | None:
    """Wait for `stop` (None) or for `fatal` to return its error."""
    stopped = asyncio.ensure_future(stop)
    failed = asyncio.ensure_future(fatal)
    await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
    for task in (stopped, failed):
        task.cancel()
    return failed.result() if failed.done() and not failed.cancelled() else None
