"""Python entry points over the same services as the CLI."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sluice.config import Settings, load_config
from sluice.errors import SluiceError
from sluice.runtime import Runtime
from sluice.service.local import controller_if_pending, prepare_launch_plan, wait_for_end
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import EventRecord, ExecutionRecord


async def run_async(
    target: Any, inputs: Mapping[str, Any], settings: Settings | None = None
) -> ExecutionRecord:
    """Launch `target` and drive it to the end in this process; the final record."""
    runtime = await Runtime.open(settings or load_config(), role="run")
    try:
        await runtime.check_launch(target, inputs)  # before the launch plan is registered
        await prepare_launch_plan(runtime, target)
        record = await runtime.launch(target, inputs)
        async with controller_if_pending(runtime, record):
            engine = await runtime.engine(only=[record.id])
            await engine.start()
            try:
                return await wait_for_end(runtime, engine, record.id)
            finally:
                await engine.stop()
    finally:
        await runtime.close()


async def events_of(execution_id: str, settings: Settings | None = None) -> list[EventRecord]:
    """Every event recorded for an execution, oldest first."""
    runtime = await Runtime.open(settings or load_config(), role="cli")
    try:
        async with runtime.store.read() as repos:
            return await repos.events.list(execution_id)
    finally:
        await runtime.close()


def run_sync(target: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    final = asyncio.run(run_async(target, inputs))
    if final.phase is not ExecutionPhase.SUCCEEDED:
        raise SluiceError(
            f"execution {final.id} ended {final.phase.value}: {final.error or final.reason}"
        )
    return dict(final.outputs or {})
