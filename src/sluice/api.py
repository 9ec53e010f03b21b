"""Python entry points over the same service as the CLI."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sluice.config import Settings, load_config
from sluice.engine.collector import collector_for_run
from sluice.errors import SluiceError
from sluice.service import RunRequest, Sluice
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import EventRecord, ExecutionRecord


async def run_async(
    target: Any,
    inputs: Mapping[str, Any],
    settings: Settings | None = None,
    idempotency_key: str | None = None,
) -> ExecutionRecord:
    """Launch `target` and drive it to the end in this process; the final record. With
    `idempotency_key`, a retry drives the execution the key created instead of a new one."""
    request = RunRequest.of(target, inputs, idempotency_key=idempotency_key)
    with collector_for_run():
        async with await Sluice.open(settings or load_config(), role="run") as service:
            return await service.run_to_end(request)


async def events_of(execution_id: str, settings: Settings | None = None) -> list[EventRecord]:
    """Every event recorded for an execution, oldest first."""
    service = await Sluice.open(settings or load_config(), role="cli")
    async with service, service.runtime.store.read() as repos:
        return await repos.events.list(execution_id)


def run_sync(
    target: Any, inputs: Mapping[str, Any], idempotency_key: str | None = None
) -> dict[str, Any]:
    final = asyncio.run(run_async(target, inputs, idempotency_key=idempotency_key))
    if final.phase is not ExecutionPhase.SUCCEEDED:
        raise SluiceError(
            f"execution {final.id} ended {final.phase.value}: {final.error or final.reason}"
        )
    return dict(final.outputs or {})
