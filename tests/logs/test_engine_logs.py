"""Task output captured end to end: python worker (fd level, subprocesses), shell, stored per
attempt, readable through LogReader, and the stderr tail in a failed task's error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from support.engine import fast_settings, run

FLOWS = Path(__file__).parent / "log_flows.py"


@pytest.fixture
def flows() -> ModuleType:
    return load_module("log_flows", str(FLOWS))


@pytest.fixture
async def runtime(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(fast_settings(sqlite_url))
    yield rt
    await rt.close()


async def test_python_task_output_is_captured_per_stream(
    runtime: Runtime, flows: ModuleType
) -> None:
    result = await run(runtime, flows.chatty_flow)
    assert result.record.phase.value == "SUCCEEDED"
    assert runtime.task_logs is not None
    await runtime.task_logs.flush()
    entries = await runtime.log_reader().lines(result.record.id, "chatty")
    got = [(e.line.stream, e.line.text) for e in entries]
    assert ("stdout", "hello from chatty 1") in got
    assert ("stderr", "warning on stderr 1") in got
    assert ("stdout", "fd-level write 1") in got
    assert ("stdout", "from a subprocess 1") in got
    assert ("stdout", "no newline at the end") in got
    assert all(e.position.attempt == 0 for e in entries)
    segments = await runtime.log_reader().segments(result.record.id, "chatty")
    assert sum(s.lines for s in segments) == len(entries)
    assert all(s.closed_at is not None for s in segments)


async def test_a_failed_task_error_carries_its_stderr_tail(
    runtime: Runtime, flows: ModuleType
) -> None:
    result = await run(runtime, flows.broken_flow)
    node = result.nodes["broken"]
    assert node.error is not None
    message = node.error["message"]
    assert message.startswith("last lines of stderr:\nabout to fail\nthe config file is missing\n")
    assert message.splitlines()[-1] == "RuntimeError: cannot go on"  # the one-line summary


async def test_a_node_not_started_yet_has_an_empty_log_and_an_unknown_node_is_named(
    runtime: Runtime, flows: ModuleType
) -> None:
    from sluice.errors import NotFoundError
    from sluice.service import Sluice

    record = await runtime.launch(flows.chatty_flow, {})  # no engine: its node never starts
    service = Sluice(runtime)
    assert await service.logs(record.id, "chatty") == []
    with pytest.raises(NotFoundError, match=r"'nope'.*chatty"):
        await service.logs(record.id, "nope")
