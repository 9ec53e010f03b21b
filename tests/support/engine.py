"""Running executions in tests: settings for fast retries, and the final state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.config import Settings, load_config
from sluice.runtime import Runtime
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord

FLOWS = Path(__file__).parent.parent / "engine" / "flows.py"


def fast_settings(url: str, **engine: Any) -> Settings:
    options = {
        "workers": 2,
        "backoff_base": 0.05,
        "backoff_max": 0.2,
        "resync_interval": 2.0,
        "max_system_failures": 2,
        **engine,
    }
    return load_config(database_url=url, engine=options)


@dataclass
class Outcome:
    record: ExecutionRecord
    nodes: dict[str, NodeRecord]
    events: list[EventRecord]


async def run(rt: Runtime, target: Any, **inputs: Any) -> Outcome:
    record = await rt.launch(target, inputs)
    engine = await rt.engine(only=[record.id])
    await engine.start()
    try:
        await engine.wait(record.id)
    finally:
        await engine.stop()
    return await outcome(rt, record.id)


async def outcome(rt: Runtime, execution_id: str) -> Outcome:
    async with rt.store.read() as repos:
        final = await repos.executions.get(execution_id)
        nodes = {n.node_id: n for n in await repos.nodes.list(execution_id)}
        events = await repos.events.list(execution_id)
    assert final is not None
    return Outcome(final, nodes, events)
