"""An execution whose reconcile keeps failing is FAILED after a bounded number of tries
(backing off between them), its nodes stopped, and the engine goes on with the others. The
traceback is logged once; later failures are one line each."""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType
from typing import Any

import pytest

from sluice.engine.executor import ExecutionDriver
from sluice.engine.state import ExecutionState
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase, NodePhase
from support.engine import fast_settings, outcome


async def test_a_reconcile_that_keeps_failing_fails_the_execution_and_the_engine_goes_on(
    sqlite_url: str, flows: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    rt = await Runtime.open(fast_settings(sqlite_url, max_reconcile_failures=4))
    try:
        broken = await rt.launch(flows.fan, {})
        healthy = await rt.launch(flows.fan, {})
        engine = await rt.engine()
        original = ExecutionDriver._evaluate_todo
        calls = 0

        async def evaluate(self: ExecutionDriver, ex: ExecutionState) -> Any:
            nonlocal calls
            if ex.id == broken.id:
                calls += 1
                raise RuntimeError(f"corrupt plugin state #{calls}")
            return await original(self, ex)

        engine.driver._evaluate_todo = evaluate.__get__(engine.driver)  # type: ignore[method-assign]
        caplog.set_level(logging.WARNING, logger="sluice.engine.engine")
        await engine.start()
        try:
            await asyncio.wait_for(engine.wait(broken.id), 30)
            await asyncio.wait_for(engine.wait(healthy.id), 30)
            await asyncio.sleep(0.3)  # no retry may follow the failure
        finally:
            await engine.stop()
        failed, fine = await outcome(rt, broken.id), await outcome(rt, healthy.id)
    finally:
        await rt.close()

    assert calls == 4
    assert failed.record.phase is ExecutionPhase.FAILED
    assert failed.record.error is not None
    assert "corrupt plugin state #4" in failed.record.error["message"]
    assert failed.record.owner is None
    assert [e.phase for e in failed.events if not e.node_id][-1] == ExecutionPhase.FAILED.value
    assert all(n.phase.is_terminal for n in failed.nodes.values())
    assert {n.phase for n in failed.nodes.values()} <= {NodePhase.SKIPPED, NodePhase.ABORTED}
    assert fine.record.phase is ExecutionPhase.SUCCEEDED

    about = [r for r in caplog.records if broken.id in r.getMessage()]
    assert len(about) == 4, [r.getMessage() for r in about]
    assert sum(1 for r in about if r.exc_info) == 1, "the traceback is logged once"
    assert about[-1].levelno == logging.ERROR


async def test_an_execution_that_cannot_be_loaded_is_failed_after_bounded_tries(
    sqlite_url: str, flows: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    rt = await Runtime.open(
        fast_settings(sqlite_url, max_reconcile_failures=3, resync_interval=0.2)
    )
    try:
        record = await rt.launch(flows.fan, {})
        engine = await rt.engine()
        tries = 0

        async def unregistered(*_: Any) -> Any:
            nonlocal tries
            tries += 1
            raise LookupError(f"workflow fan of {record.id} is not registered")

        engine.ownership._workflow = unregistered  # type: ignore[method-assign]
        caplog.set_level(logging.WARNING, logger="sluice.engine.ownership")
        await engine.start()
        try:
            for _ in range(200):
                if (await outcome(rt, record.id)).record.phase.is_terminal:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # no further try follows
        finally:
            await engine.stop()
        final = await outcome(rt, record.id)
    finally:
        await rt.close()
    assert tries == 3
    assert final.record.phase is ExecutionPhase.FAILED
    assert final.record.error is not None and "not registered" in final.record.error["message"]
    assert final.record.owner is None
    assert final.events[-1].phase == ExecutionPhase.FAILED.value
    assert sum(1 for r in caplog.records if r.exc_info) == 1
