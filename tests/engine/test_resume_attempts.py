"""An attempt resumed by a new engine holds exactly what the store says it holds.

The engine "stopped abruptly" is an Engine that is simply never driven again; the new one is
another Engine (another engine id) over the same store, resource manager and cache, after the
injected clock has passed the old one's leases. Engines are pumped by hand (no loops started),
so every step is deterministic. The plugin of type "hold" stays RUNNING until the test lets a
node finish, and records which attempts run (handled and not stopped since).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import sluice
from sluice.clock import FakeClock
from sluice.config import load_config
from sluice.engine.engine import Engine
from sluice.engine.services import EngineServices
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import Phase, PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginEntry, PluginProperties
from sluice.resources import Claim, Holder
from sluice.runtime import Runtime, compose_engine
from sluice.spec.phases import CacheStatus, ExecutionPhase, NodePhase, ReservationStatus
from support.engine import outcome

LEASE = 5.0
PAST_EVERY_LEASE = 45.0
"""More than the execution lease (30 s), the token lease and the reservation expiry (30 s)."""


@dataclass
class HoldPlugin:
    """Tasks of type "hold": RUNNING until `finish` names the node's execution/node."""

    live: set[str] = field(default_factory=set)
    finish: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)
    most_live: int = 0

    @property
    def id(self) -> str:
        return "hold"

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    @staticmethod
    def key(ctx: TaskExecutionContext) -> str:
        return f"{ctx.metadata.execution_id}/{ctx.metadata.node_id}"

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        key = self.key(ctx)
        self.calls.append(("handle", key))
        if key in self.finish:
            self.live.discard(key)
            ctx.outputs.put({"o0": 7})
            return Transition.to(PhaseInfo.success())
        self.live.add(key)
        self.most_live = max(self.most_live, len(self.live))
        return Transition.to(PhaseInfo.running(1, "holding"))

    async def abort(self, ctx: TaskExecutionContext) -> None:
        self.calls.append(("abort", self.key(ctx)))
        self.live.discard(self.key(ctx))

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        self.calls.append(("finalize", self.key(ctx)))
        self.live.discard(self.key(ctx))


@sluice.task(type="hold", quotas=[sluice.Quota("warehouse")], name="tests.resume.quota_held")
def quota_held() -> int: ...


@sluice.workflow(name="tests.resume.quota_flow")
def quota_flow() -> int:
    return quota_held()


@sluice.task(
    type="hold", cache=sluice.Cache(version="1", serialize=True), name="tests.resume.computed"
)
def computed(x: int) -> int: ...


@sluice.workflow(name="tests.resume.cache_flow")
def cache_flow(x: int = 1) -> int:
    return computed(x=x)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def plugin() -> HoldPlugin:
    return HoldPlugin()


@pytest.fixture
async def rt(
    tmp_path: Path, clock: FakeClock, plugin: HoldPlugin, resources: dict[str, Any]
) -> AsyncIterator[Runtime]:
    settings = load_config(
        database_url=f"sqlite:///{tmp_path / 's.db'}",
        engine={"workers": 1, "backoff_base": 0.0, "backoff_max": 0.0},
        resources={**resources, "quotas": {"warehouse": 1}, "lease": LEASE},
    )
    runtime = await Runtime.open(settings, clock=clock)
    entry = PluginEntry(id="hold", task_types=("hold",), load=lambda _: plugin)
    await runtime.load_plugins([entry])
    await runtime.resources.start()  # stores the configured quotas
    yield runtime
    await runtime.close()


async def new_engine(rt: Runtime, engine_id: str, only: list[str]) -> Engine:
    """An engine of its own id over the runtime's store, resource manager and cache."""
    services = EngineServices(
        config=rt.settings.engine,
        clock=rt.clock,
        registry=await rt.load_plugins(),
        secrets=rt.secrets,
        metrics=CollectorRegistry(),
        engine_id=engine_id,
    )
    await rt.resources.start()
    return compose_engine(
        services,
        rt.store,
        None,
        only=only,
        catalog=await rt.open_catalog(),
        cache_config=rt.settings.cache,
        resources=rt.resources,
        resources_config=rt.settings.resources,
    )


async def pump(engine: Engine, *execution_ids: str) -> None:
    """Reconcile the given executions (all owned ones by default) until nothing is queued."""
    for execution_id in execution_ids or list(engine._executions):
        engine.enqueue(execution_id)
    for _ in range(50):
        if engine._queue.empty():
            return
        execution_id = engine._queue.get_nowait()
        engine._queued.discard(execution_id)
        ex = engine._executions.get(execution_id)
        if ex is not None:
            await engine._reconcile(ex)
            engine.scheduling.admit()


async def started(rt: Runtime, engine_id: str, execution_id: str) -> Engine:
    engine = await new_engine(rt, engine_id, [execution_id])
    assert await engine.claim() == 1
    await pump(engine)
    return engine


OTHER = "ex:default:development:xother-n0"


async def take_quota_elsewhere(rt: Runtime) -> None:
    holder = Holder("default", "development", "xother", "n0")
    result = await rt.resources.allocate(OTHER, [Claim("warehouse", 1)], holder)
    assert result.granted, result.reason()


async def test_resumed_attempt_whose_token_was_taken_stops_and_waits_for_it(
    rt: Runtime, clock: FakeClock, plugin: HoldPlugin
) -> None:
    record = await rt.launch(quota_flow, {})
    key = f"{record.id}/quota_held"
    await started(rt, "engine-a", record.id)
    assert plugin.live == {key}
    clock.advance(PAST_EVERY_LEASE)  # engine-a is gone: nothing renews its token
    await take_quota_elsewhere(rt)  # its lapsed lease is reclaimed by someone else

    engine = await started(rt, "engine-b", record.id)
    assert key not in plugin.live, "the resumed attempt ran on a token it no longer holds"
    assert plugin.calls[-2:] == [("abort", key), ("finalize", key)]
    node = (await outcome(rt, record.id)).nodes["quota_held"]
    assert node.phase is NodePhase.RUNNING
    assert node.task_phase == Phase.WAITING_FOR_RESOURCES
    assert node.attempt == 0 and node.attempt_started_at is None, "not a user retry"
    assert "warehouse" in node.reason
    events = (await outcome(rt, record.id)).events
    stopped = [e for e in events if e.phase == "CLAIMS_LOST"]
    assert stopped and "warehouse" in stopped[0].reason
    snapshot = (await rt.resources.describe("warehouse"))[0]
    assert [h.token for h in snapshot.holders] == [OTHER]

    await rt.resources.release(OTHER, ["warehouse"])
    await pump(engine)
    assert plugin.live == {key}, "granted again, the attempt starts afresh"
    plugin.finish.add(key)
    await pump(engine)
    result = await outcome(rt, record.id)
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert plugin.most_live == 1


async def test_resumed_attempt_still_grantable_runs_on_without_a_restart(
    rt: Runtime, clock: FakeClock, plugin: HoldPlugin
) -> None:
    record = await rt.launch(quota_flow, {})
    key = f"{record.id}/quota_held"
    await started(rt, "engine-a", record.id)
    before = (await outcome(rt, record.id)).nodes["quota_held"]
    clock.advance(PAST_EVERY_LEASE)
    engine = await started(rt, "engine-b", record.id)
    assert ("abort", key) not in plugin.calls
    node = (await outcome(rt, record.id)).nodes["quota_held"]
    assert node.attempt_started_at == before.attempt_started_at
    holders = (await rt.resources.describe("warehouse"))[0].holders
    assert [h.lease_expires_at for h in holders] == [clock.now() + LEASE], "re-claimed"
    plugin.finish.add(key)
    await pump(engine)
    assert (await outcome(rt, record.id)).record.phase is ExecutionPhase.SUCCEEDED


async def test_a_token_lost_while_running_stops_the_attempt_at_renewal(
    rt: Runtime, clock: FakeClock, plugin: HoldPlugin
) -> None:
    record = await rt.launch(quota_flow, {})
    key = f"{record.id}/quota_held"
    engine = await started(rt, "engine-a", record.id)
    clock.advance(LEASE + 1)  # the renewal loop was starved past the lease
    await take_quota_elsewhere(rt)
    await engine._renew_claims()
    await pump(engine)
    assert key not in plugin.live, "ran on after its renewal said the token was gone"
    assert ("abort", key) in plugin.calls
    node = (await outcome(rt, record.id)).nodes["quota_held"]
    assert node.task_phase == Phase.WAITING_FOR_RESOURCES and node.attempt == 0


async def test_aborting_a_waiting_node_withdraws_its_waiter_entry(
    rt: Runtime, plugin: HoldPlugin
) -> None:
    await take_quota_elsewhere(rt)
    record = await rt.launch(quota_flow, {})
    engine = await started(rt, "engine-a", record.id)
    node = (await outcome(rt, record.id)).nodes["quota_held"]
    assert node.task_phase == Phase.WAITING_FOR_RESOURCES
    assert (await rt.resources.describe("warehouse"))[0].waiters
    ex = engine._executions[record.id]
    ex.record.phase, ex.record.reason = ExecutionPhase.ABORTING, "stopped by a test"
    await pump(engine)
    assert (await outcome(rt, record.id)).record.phase is ExecutionPhase.ABORTED
    assert (await rt.resources.describe("warehouse"))[0].waiters == (), "a ghost waiter"


@pytest.mark.parametrize("resources", ["store"], indirect=True)
async def test_resumed_owner_whose_reservation_was_taken_waits_instead_of_computing(
    rt: Runtime, clock: FakeClock, plugin: HoldPlugin
) -> None:
    first = await rt.launch(cache_flow, {})
    first_key = f"{first.id}/computed"
    await started(rt, "engine-a", first.id)
    assert plugin.live == {first_key}
    clock.advance(PAST_EVERY_LEASE)  # engine-a is gone; its reservation expired
    second = await rt.launch(cache_flow, {})
    second_key = f"{second.id}/computed"
    other = await started(rt, "engine-b", second.id)  # takes the expired reservation over
    assert second_key in plugin.live

    calls_before = len(plugin.calls)
    resumed = await started(rt, "engine-c", first.id)
    assert first_key not in plugin.live, "two live bodies for one cache key"
    assert ("handle", first_key) not in plugin.calls[calls_before:]
    assert ("abort", first_key) in plugin.calls
    node = (await outcome(rt, first.id)).nodes["computed"]
    assert node.task_phase == Phase.WAITING_FOR_CACHE
    assert node.reservation_status is ReservationStatus.EXISTS

    plugin.finish.add(second_key)
    await pump(other)
    await pump(resumed)
    result = await outcome(rt, first.id)
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert result.nodes["computed"].cache_status is CacheStatus.HIT
    assert ("handle", first_key) not in plugin.calls[calls_before:], "computed twice"


@pytest.mark.parametrize("resources", ["store"], indirect=True)
async def test_resumed_owner_keeps_its_reservation_alive(
    rt: Runtime, clock: FakeClock, plugin: HoldPlugin
) -> None:
    first = await rt.launch(cache_flow, {})
    first_key = f"{first.id}/computed"
    await started(rt, "engine-a", first.id)
    clock.advance(PAST_EVERY_LEASE)
    resumed = await started(rt, "engine-b", first.id)
    assert first_key in plugin.live and ("abort", first_key) not in plugin.calls
    for _ in range(4):  # 80 s in heartbeats: far past the 30 s expiry of one extension
        clock.advance(20.0)
        await pump(resumed)
    second = await rt.launch(cache_flow, {})
    await started(rt, "engine-c", second.id)
    assert plugin.live == {first_key}, "a waiter took over from a live owner"
    node = (await outcome(rt, second.id)).nodes["computed"]
    assert node.task_phase == Phase.WAITING_FOR_CACHE and first.id in node.reason
