"""Executions driven in this process: the controller candidate and engine that `sluice run`,
`executions create --wait`, `executions abort` and the Python API start next to a launch.

A PENDING execution needs a live controller. `sluice serve` runs one for the deployment;
embedded commands run a candidate next to their engine (`run_controller_candidate`), which
stands by while another process leads and leads when nobody does, so a `sluice run` of a
launch plan with a policy is promoted with or without a `sluice serve` somewhere.

`drive_here` is the one choreography every local run follows: a controller candidate if the
execution is PENDING, an engine limited to the execution, the end awaited, both stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from sluice.concurrency.controller import ConcurrencyController, ControllerOptions
from sluice.concurrency.leader import leader_lock_for
from sluice.concurrency.metrics import ControllerMetrics
from sluice.errors import NotFoundError
from sluice.executions.launch import request_abort
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.policies import UNDECIDED_REASON
from sluice.spec.compound import LAUNCH_PLAN_TYPE
from sluice.spec.phases import ExecutionPhase
from sluice.store.notify import EXECUTIONS_CHANNEL, WAKE_ALL
from sluice.store.records import ExecutionRecord

if TYPE_CHECKING:
    from sluice.engine.engine import Engine
    from sluice.runtime import Runtime

_POLL = 1.0  # seconds: a safety net under the notifications


def controller_for(
    runtime: Runtime, options: ControllerOptions | None = None, *, metrics: bool = False
) -> ConcurrencyController:
    """A controller candidate for this runtime's deployment."""
    return ConcurrencyController(
        runtime.store,
        runtime.notifier,
        runtime.clock,
        lock=leader_lock_for(runtime.store.db),
        config=runtime.settings.concurrency,
        instance_id=runtime.instance_id,
        options=options or ControllerOptions(),
        metrics=ControllerMetrics(runtime.metrics) if metrics else None,
    )


@contextlib.asynccontextmanager
async def run_controller_candidate(
    runtime: Runtime, options: ControllerOptions | None = None, *, metrics: bool = False
) -> AsyncIterator[ConcurrencyController]:
    """Run a controller candidate in the background for the duration of the block."""
    controller = controller_for(runtime, options, metrics=metrics)
    task = asyncio.create_task(controller.run(), name="sluice-controller")
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def controller_if_pending(
    runtime: Runtime, record: ExecutionRecord
) -> AsyncIterator[ConcurrencyController | None]:
    """A controller candidate for the block when `record` waits for a decision (PENDING) or
    its workflow calls launch plans (their executions may wait for one); nothing otherwise,
    so runs without a policy or cap pay nothing."""
    if record.phase is not ExecutionPhase.PENDING and not await _calls_launch_plans(
        runtime, record
    ):
        yield None
        return
    async with run_controller_candidate(runtime) as controller:
        yield controller


async def _calls_launch_plans(runtime: Runtime, record: ExecutionRecord) -> bool:
    workflow = runtime.workflows.get((record.project, record.domain, record.workflow_key))
    if workflow is None:
        async with runtime.store.read() as repos:
            workflow = await repos.specs.get_workflow(
                record.project, record.domain, record.workflow_name, record.workflow_version
            )
    return workflow is not None and any(
        task.type == LAUNCH_PLAN_TYPE for task in workflow.tasks.values()
    )


async def controller_live(runtime: Runtime) -> bool:
    """Whether some process holds the leader lock (probed by trying to take it)."""
    lock = leader_lock_for(runtime.store.db)
    try:
        return not await lock.try_acquire()
    finally:
        await lock.release()


async def prepare_launch_plan(runtime: Runtime, target: Any) -> None:
    """For `sluice run FILE:LAUNCH_PLAN`: register the launch plan's version, activating it
    if its name has no ACTIVE version. Workflows and tasks need nothing."""
    from sluice.sdk.launch_plan import LaunchPlan

    if isinstance(target, LaunchPlan):
        service = LaunchPlanService(
            runtime.store,
            runtime.notifier,
            runtime.clock,
            runtime.settings.project,
            runtime.settings.domain,
        )
        await service.ensure_registered(target.spec, target.workflow.spec)


@contextlib.asynccontextmanager
async def drive_here(runtime: Runtime, record: ExecutionRecord) -> AsyncIterator[LocalRun]:
    """Drive `record` in this process for the block: a controller candidate while it is
    PENDING, an engine limited to it; both stopped when the block ends."""
    async with controller_if_pending(runtime, record):
        engine = await runtime.engine(only=[record.id])
        await engine.start()
        try:
            yield LocalRun(runtime, engine, record.id)
        finally:
            await engine.stop()


class LocalRun:
    """An execution driven by this process: wait for its end, or abort it."""

    def __init__(self, runtime: Runtime, engine: Engine, execution_id: str) -> None:
        self._runtime, self._engine, self.execution_id = runtime, engine, execution_id

    async def wait(self) -> ExecutionRecord:
        """The execution once terminal, however it ended (driven here, SKIPPED, aborted)."""
        return await wait_for_end(self._runtime, self._engine, self.execution_id)

    async def abort(self, reason: str) -> ExecutionRecord:
        runtime = self._runtime
        return await request_abort(
            runtime.store, runtime.notifier, runtime.clock, self.execution_id, reason
        )


async def wait_for_end(runtime: Runtime, engine: Engine, execution_id: str) -> ExecutionRecord:
    """Until the execution is terminal: driven there by `engine`, or ended without any
    engine (SKIPPED by its policy, aborted while PENDING)."""
    driven = asyncio.create_task(engine.wait(execution_id))
    try:
        return await watch(runtime, execution_id, lambda r: r.phase.is_terminal, driven)
    finally:
        driven.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driven


async def await_decision(runtime: Runtime, execution_id: str, within: float) -> ExecutionRecord:
    """Until the controller has decided about the execution (promoted, skipped, or told it
    what it waits for), or `within` seconds pass; the record as it then is."""
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(watch(runtime, execution_id, _decided), within)
    return await _read(runtime, execution_id)


def _decided(record: ExecutionRecord) -> bool:
    return record.phase is not ExecutionPhase.PENDING or record.reason != UNDECIDED_REASON


async def watch(
    runtime: Runtime,
    execution_id: str,
    done: Callable[[ExecutionRecord], bool],
    also: asyncio.Future[Any] | None = None,
) -> ExecutionRecord:
    """Re-read the execution on each of its notifications (and every second) until
    `done(record)` holds or `also` completes; the last record read."""
    changed = asyncio.Event()

    def on_change(payload: str) -> None:
        if payload in (execution_id, WAKE_ALL):
            changed.set()

    unsubscribe = runtime.notifier.subscribe(EXECUTIONS_CHANNEL, on_change)
    try:
        while True:
            changed.clear()
            record = await _read(runtime, execution_id)
            if done(record) or (also is not None and also.done()):
                return record
            waiters = [asyncio.ensure_future(changed.wait()), *([also] if also else [])]
            await asyncio.wait(waiters, timeout=_POLL, return_when=asyncio.FIRST_COMPLETED)
            waiters[0].cancel()
    finally:
        unsubscribe()


async def _read(runtime: Runtime, execution_id: str) -> ExecutionRecord:
    async with runtime.store.read() as repos:
        record = await repos.executions.get(execution_id)
    if record is None:
        raise NotFoundError(f"execution {execution_id!r} does not exist")
    return record


@contextlib.asynccontextmanager
async def controller_only(runtime: Runtime, record: ExecutionRecord) -> AsyncIterator[None]:
    """A controller candidate for the block when `record` is PENDING (no engine)."""
    async with controller_if_pending(runtime, record):
        yield


async def until_terminal(
    runtime: Runtime, execution_id: str, within: float | None
) -> ExecutionRecord:
    """The execution once terminal (its end arrives as a notification, or is re-read every
    second), or as it is after `within` seconds (None: no limit)."""
    terminal = watch(runtime, execution_id, lambda record: record.phase.is_terminal)
    if within is None:
        return await terminal
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(terminal, within)
    return await _read(runtime, execution_id)
