"""Every plugin call is bounded: by the task's remaining timeout and by
engine.plugin_call_timeout. A plugin that never returns (or even swallows its cancellation)
times its task out or fails it with a retryable system error, and never stalls the engine."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.config import load_config
from sluice.engine.engine import RECONCILE_WORKERS
from sluice.errors import ConfigError
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginEntry, PluginProperties
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase, NodePhase
from support.engine import outcome


@dataclass
class HangPlugin:
    """ "hang" tasks await forever in handle; "stubborn" ones also swallow cancellation
    until the test lets go; "quick" ones succeed at once."""

    kind: str
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0
    let_go: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: int = 0

    @property
    def id(self) -> str:
        return self.kind

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        if self.kind == "quick":
            ctx.outputs.put({"o0": 1})
            return Transition.to(PhaseInfo.success())
        if self.kind == "sticky":
            return Transition.to(PhaseInfo.running(1, "running; abort and finalize hang"))
        self.calls += 1
        self.entered.set()
        if self.kind == "hang":
            await asyncio.Event().wait()
        while not self.let_go.is_set():
            try:
                await self.let_go.wait()
            except asyncio.CancelledError:
                self.cancelled += 1  # breaks the contract: carries on
        return Transition.to(PhaseInfo.running(1, "finally"))

    async def abort(self, ctx: TaskExecutionContext) -> None:
        if self.kind == "sticky":
            await asyncio.Event().wait()

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        if self.kind == "sticky":
            await asyncio.Event().wait()


@sluice.task(type="hang", timeout=0.5, name="tests.timeouts.hung")
def hung() -> int: ...


@sluice.task(type="hang", name="tests.timeouts.hung_untimed")
def hung_untimed() -> int: ...


@sluice.task(type="stubborn", timeout=0.5, name="tests.timeouts.stubborn")
def stubborn() -> int: ...


@sluice.task(type="quick", name="tests.timeouts.quick")
def quick() -> int: ...


@sluice.task(type="sticky", timeout=0.5, name="tests.timeouts.sticky")
def sticky() -> int: ...


@sluice.workflow(name="tests.timeouts.sticky_flow")
def sticky_flow() -> int:
    return sticky()


@sluice.workflow(name="tests.timeouts.hung_flow")
def hung_flow() -> int:
    return hung()


@sluice.workflow(name="tests.timeouts.untimed_flow")
def untimed_flow() -> int:
    return hung_untimed()


@sluice.workflow(name="tests.timeouts.stubborn_flow")
def stubborn_flow() -> int:
    return stubborn()


@sluice.workflow(name="tests.timeouts.quick_flow")
def quick_flow() -> int:
    return quick()


PLUGINS = ("hang", "stubborn", "quick", "sticky")


async def open_runtime(tmp_path: Path, **engine: Any) -> tuple[Runtime, dict[str, HangPlugin]]:
    settings = load_config(
        database_url=f"sqlite:///{tmp_path / 's.db'}",
        engine={"workers": 1, "resync_interval": 1.0, "backoff_base": 0.0, **engine},
    )
    rt = await Runtime.open(settings)
    plugins = {kind: HangPlugin(kind) for kind in PLUGINS}
    await rt.load_plugins(
        [PluginEntry(id=k, task_types=(k,), load=lambda _, p=p: p) for k, p in plugins.items()]
    )
    return rt, plugins


@pytest.fixture
async def timeouts(tmp_path: Path) -> AsyncIterator[tuple[Runtime, dict[str, HangPlugin]]]:
    rt, plugins = await open_runtime(tmp_path, plugin_call_timeout=30.0, max_system_failures=0)
    yield rt, plugins
    plugins["stubborn"].let_go.set()
    await asyncio.sleep(0)
    await rt.close()


async def drive(rt: Runtime, *execution_ids: str) -> None:
    engine = await rt.engine(only=list(execution_ids))
    await engine.start()
    try:
        for execution_id in execution_ids:
            await asyncio.wait_for(engine.wait(execution_id), 30)
    finally:
        await asyncio.wait_for(engine.stop(), 30)


async def test_task_timeout_fires_on_a_handle_that_never_returns(
    timeouts: tuple[Runtime, dict[str, HangPlugin]],
) -> None:
    rt, _ = timeouts
    record = await rt.launch(hung_flow, {})
    await drive(rt, record.id)
    result = await outcome(rt, record.id)
    assert result.record.phase is ExecutionPhase.FAILED
    node = result.nodes["hung"]
    assert node.phase is NodePhase.FAILED
    assert (node.error or {}).get("code") == "Timeout", node.error
    failures = [e for e in result.events if e.node_id == "hung" and e.phase.endswith("FAILURE")]
    assert failures and "timed out after 0.5s" in failures[-1].reason


async def test_a_plugin_swallowing_its_cancellation_does_not_hang_the_engine(
    timeouts: tuple[Runtime, dict[str, HangPlugin]], caplog: pytest.LogCaptureFixture
) -> None:
    rt, plugins = timeouts
    record = await rt.launch(stubborn_flow, {})
    await drive(rt, record.id)
    result = await outcome(rt, record.id)
    assert (result.nodes["stubborn"].error or {}).get("code") == "Timeout"
    assert plugins["stubborn"].cancelled >= 1
    await asyncio.sleep(0.7)  # past the grace a cancelled call gets to end
    assert any("abandoned" in r.getMessage() for r in caplog.records), caplog.text


async def test_a_cancelled_call_that_ends_is_not_reported_as_abandoned(
    timeouts: tuple[Runtime, dict[str, HangPlugin]], caplog: pytest.LogCaptureFixture
) -> None:
    """An overrun handle() that honours its cancellation is a timeout, not an ERROR line."""
    rt, _ = timeouts
    record = await rt.launch(hung_flow, {})
    await drive(rt, record.id)
    await asyncio.sleep(0.7)
    assert not [r for r in caplog.records if "abandoned" in r.getMessage()], caplog.text


async def test_per_call_cap_fails_the_attempt_as_a_retryable_system_error(
    tmp_path: Path,
) -> None:
    rt, _ = await open_runtime(tmp_path, plugin_call_timeout=0.3, max_system_failures=1)
    try:
        record = await rt.launch(untimed_flow, {})
        await drive(rt, record.id)
        result = await outcome(rt, record.id)
    finally:
        await rt.close()
    node = result.nodes["hung_untimed"]
    assert node.phase is NodePhase.FAILED
    assert node.error is not None and node.error["code"] == "PluginTimeout"
    assert node.error["kind"] == "SYSTEM" and "handle" in node.error["message"]
    assert node.system_failures == 1, "retried once as a system failure"
    reasons = [e.reason for e in result.events if e.node_id == "hung_untimed"]
    assert any("plugin_call_timeout" in r for r in reasons), reasons


async def test_hung_abort_and_finalize_are_cut_by_the_cap(tmp_path: Path) -> None:
    rt, _ = await open_runtime(tmp_path, plugin_call_timeout=0.3, max_system_failures=0)
    try:
        record = await rt.launch(sticky_flow, {})
        await drive(rt, record.id)
        result = await outcome(rt, record.id)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.FAILED
    assert (result.nodes["sticky"].error or {}).get("code") == "Timeout"


async def test_other_executions_are_served_while_plugins_hang(
    timeouts: tuple[Runtime, dict[str, HangPlugin]],
) -> None:
    # More hung executions than the engine has reconcile workers: none may hold one.
    rt, plugins = timeouts
    stuck = [await rt.launch(untimed_flow, {}) for _ in range(RECONCILE_WORKERS + 1)]
    engine = await rt.engine()
    await engine.start()
    try:

        async def all_entered() -> None:
            while True:
                if plugins["hang"].calls >= len(stuck):
                    return
                await asyncio.sleep(0.01)

        await asyncio.wait_for(all_entered(), 20)
        served = await rt.launch(quick_flow, {})
        await asyncio.wait_for(engine.wait(served.id), 20)
        assert (await outcome(rt, served.id)).record.phase is ExecutionPhase.SUCCEEDED

        async def all_stored_running() -> None:  # each reconcile went on and persisted
            while True:
                phases = {(await outcome(rt, r.id)).record.phase for r in stuck}
                if phases == {ExecutionPhase.RUNNING}:
                    return
                await asyncio.sleep(0.05)

        await asyncio.wait_for(all_stored_running(), 20)
        assert plugins["hang"].calls == len(stuck), "handle() is never called twice at once"
    finally:
        await asyncio.wait_for(engine.stop(), 30)


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan])
def test_plugin_call_timeout_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(ConfigError, match="plugin_call_timeout") as caught:
        load_config(engine={"plugin_call_timeout": bad})
    assert "\n" not in str(caught.value)
