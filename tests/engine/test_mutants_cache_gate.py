"""Tests written against mutants of the engine's cache gate (docs/mutation.md): what CacheGate
asks of a real Catalog over the memory repository and records in the node, on a FakeClock.
In process; no engine or store. Two executions of one task on the same inputs share a key."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sluice.cache import CacheEntry, CacheSource, Catalog, MemoryRepository, cache_key
from sluice.cache.backends.memory import MemoryEntries
from sluice.clock import FakeClock
from sluice.config import CacheConfig
from sluice.engine.cache_gate import CacheGate
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import StoreError
from sluice.plugins.core.phase import Phase
from sluice.spec.models import (
    CacheSpec,
    InputSpec,
    Interface,
    NodeSpec,
    TaskMetadata,
    TaskSpec,
    WorkflowSpec,
)
from sluice.spec.phases import CacheStatus, ExecutionPhase, ReservationStatus
from sluice.spec.types import TypeSpec
from sluice.store.records import ExecutionRecord, NodeRecord
from support.cache import HeldEntries

T0 = 1_000.0
INT = TypeSpec(kind="int")
# The gate asks for a 4 s heartbeat; the catalog keeps the default max (10 s) and grace (x3).
HEARTBEAT = 4.0
GRACE = 3


def task(*, serialize: bool = True, max_age: float | None = None) -> TaskSpec:
    return TaskSpec(
        name="t",
        version="1",
        interface=Interface(inputs={"x": InputSpec(type=INT)}, outputs={"y": INT}),
        metadata=TaskMetadata(
            cache=CacheSpec(enabled=True, version="v1", serialize=serialize, max_age=max_age)
        ),
    )


def execution(spec: TaskSpec, ex_id: str = "ex1", **options: Any) -> ExecutionState:
    record = ExecutionRecord(
        ex_id, "proj", "dev", "wf", "1", ExecutionPhase.RUNNING, {}, T0, T0, options=options
    )
    workflow = WorkflowSpec(
        name="wf", version="1", nodes=(NodeSpec(id="n1", task=spec.key),), tasks={spec.key: spec}
    )
    return ExecutionState.build(record, workflow, [NodeRecord(ex_id, "n1", inputs={"x": 1})])


class Gates:
    """A catalog on the memory repository and the gate of one engine over it."""

    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.registry = CollectorRegistry()
        self.catalog = Catalog(
            MemoryRepository(self.clock),
            clock=self.clock,
            config=CacheConfig(),
            metrics=self.registry,
        )
        self.waits: list[tuple[str, str, str, float | None]] = []
        self.gate = CacheGate(
            self.catalog,
            CacheConfig(heartbeat_interval=HEARTBEAT),
            self.clock,
            lambda *wait: self.waits.append(wait),
        )

    async def reservations(self) -> list[tuple[str, float]]:
        rows = await self.catalog._repo.reservations.list_all()
        return [(r.owner_id, r.expires_at) for r in rows]

    def waited(self) -> float | None:
        return self.registry.get_sample_value("sluice_cache_reservation_wait_seconds_sum")


def the_node(ex: ExecutionState) -> NodeState:
    return ex.nodes["n1"]


KEY = cache_key("proj", "dev", task(), {"x": 1})


async def put(gates: Gates, outputs: dict[str, Any], source: CacheSource | None = None) -> None:
    assert await gates.catalog.put(KEY, CacheEntry(outputs, "t", "v1", source or CacheSource()))


async def test_the_key_is_of_the_executions_project_domain_task_and_inputs() -> None:
    gates = Gates()
    ex = execution(task())
    assert gates.gate._key(ex, the_node(ex)) == KEY
    assert the_node(ex).cache_key == KEY
    the_node(ex).cache_key = "kept"  # computed once per node
    assert gates.gate._key(ex, the_node(ex)) == "kept"


async def test_a_hit_succeeds_with_the_cached_outputs_and_reserves_nothing() -> None:
    gates = Gates()
    await put(gates, {"y": 7}, CacheSource("ex0", "n1"))
    ex = execution(task())
    node = the_node(ex)
    info = await gates.gate.before_launch(ex, node)
    assert info is not None and info.phase is Phase.SUCCESS
    assert info.reason == "cache hit: outputs computed by ex0"
    assert node.record.outputs == {"y": 7}
    assert node.record.cache_status is CacheStatus.HIT
    assert node.record.reservation_status is ReservationStatus.DISABLED
    assert (await gates.reservations(), gates.waits, node.heartbeat_at) == ([], [], None)


async def test_a_hit_without_a_source_execution_says_an_earlier_run() -> None:
    gates = Gates()
    await put(gates, {"y": 7})
    ex = execution(task(serialize=False))
    info = await gates.gate.before_launch(ex, the_node(ex))
    assert info is not None and info.reason == "cache hit: outputs computed by an earlier run"


async def test_an_entry_older_than_max_age_is_a_miss() -> None:
    gates = Gates()
    await put(gates, {"y": 7})
    gates.clock.advance(61)
    ex = execution(task(serialize=False, max_age=60))
    assert await gates.gate.before_launch(ex, the_node(ex)) is None
    assert the_node(ex).record.cache_status is CacheStatus.MISS


async def test_a_miss_of_a_task_that_is_not_serialized_goes_on_without_a_reservation() -> None:
    gates = Gates()
    ex = execution(task(serialize=False))
    assert await gates.gate.before_launch(ex, the_node(ex)) is None
    assert the_node(ex).record.cache_status is CacheStatus.MISS
    assert the_node(ex).record.reservation_status is ReservationStatus.DISABLED
    assert (await gates.reservations(), the_node(ex).heartbeat_at) == ([], None)


async def test_a_miss_acquires_the_reservation_and_arms_the_heartbeat() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    assert await gates.gate.before_launch(ex, node) is None
    assert node.record.cache_status is CacheStatus.MISS
    assert node.record.reservation_status is ReservationStatus.ACQUIRED
    assert node.heartbeat_at == T0 + HEARTBEAT
    assert await gates.reservations() == [("ex1/n1@0", T0 + HEARTBEAT * GRACE)]
    assert (gates.waits, gates.waited()) == ([], 0.0)


async def test_someone_elses_reservation_makes_the_node_wait_for_its_put_or_expiry() -> None:
    gates = Gates()
    owner, waiter = execution(task()), execution(task(), "ex2")
    assert await gates.gate.before_launch(owner, the_node(owner)) is None
    gates.clock.advance(2)
    info = await gates.gate.before_launch(waiter, the_node(waiter))
    assert info is not None and info.phase is Phase.WAITING_FOR_CACHE
    assert info.version == 0
    assert info.reason == (
        "waiting for cache to be populated by reservation owner ex1/n1 "
        "(its reservation expires in 10s unless extended)"
    )
    node = the_node(waiter)
    assert node.record.reservation_status is ReservationStatus.EXISTS
    assert gates.waits == [(KEY, "ex2", "n1", T0 + HEARTBEAT * GRACE)]
    assert (node.waiting_since, node.heartbeat_at) == (T0 + 2, None)
    assert await gates.reservations() == [("ex1/n1@0", T0 + HEARTBEAT * GRACE)]

    gates.clock.advance(3)  # still waiting: it waits since it first found the owner
    assert await gates.gate.before_launch(waiter, node) is not None
    assert node.waiting_since == T0 + 2
    the_node(owner).record.outputs = {"y": 5}
    await gates.gate.after_attempt(owner, the_node(owner), True)
    info = await gates.gate.before_launch(waiter, node)
    assert info is not None and info.phase is Phase.SUCCESS
    assert node.record.outputs == {"y": 5}
    assert (node.waiting_since, gates.waited()) == (None, 3.0)


async def test_a_waiter_takes_an_expired_reservation_over_and_observes_its_wait() -> None:
    gates = Gates()
    owner, waiter = execution(task()), execution(task(), "ex2")
    await gates.gate.before_launch(owner, the_node(owner))
    await gates.gate.before_launch(waiter, the_node(waiter))
    gates.clock.advance(HEARTBEAT * GRACE)  # expired, not swept
    assert await gates.gate.before_launch(waiter, the_node(waiter)) is None
    node = the_node(waiter)
    assert node.record.reservation_status is ReservationStatus.ACQUIRED
    assert node.heartbeat_at == T0 + HEARTBEAT * GRACE + HEARTBEAT
    assert await gates.reservations() == [("ex2/n1@0", T0 + 2 * HEARTBEAT * GRACE)]
    assert (node.waiting_since, gates.waited()) == (None, HEARTBEAT * GRACE)


async def test_an_unreachable_reservation_store_waits_a_second() -> None:
    gates = Gates()

    async def down(*args: Any) -> Any:
        raise StoreError("down")

    gates.catalog.get_or_extend_reservation = down  # type: ignore[method-assign]
    ex = execution(task())
    info = await gates.gate.before_launch(ex, the_node(ex))
    assert info is not None and info.phase is Phase.WAITING_FOR_CACHE
    assert (info.version, info.reason) == (0, "cannot reach the reservation store: down")
    assert the_node(ex).record.reservation_status is ReservationStatus.FAILURE
    assert gates.waits == [(KEY, "ex1", "n1", T0 + 1.0)]


async def test_a_failed_lookup_goes_on_to_the_reservation() -> None:
    gates = Gates()
    real_get = gates.catalog.get

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("down")

    gates.catalog.get = down  # type: ignore[method-assign]
    ex = execution(task())
    assert await gates.gate.before_launch(ex, the_node(ex)) is None
    assert the_node(ex).record.cache_status is CacheStatus.LOOKUP_FAILURE
    assert the_node(ex).record.reservation_status is ReservationStatus.ACQUIRED
    gates.catalog.get = real_get  # type: ignore[method-assign]


async def test_an_entry_put_just_before_the_claim_is_a_hit_and_the_claim_is_given_back() -> None:
    gates = Gates()
    claim = gates.catalog.get_or_extend_reservation

    async def put_then_claim(*args: Any) -> Any:
        await put(gates, {"y": 9}, CacheSource("ex0", "n1"))  # the previous owner's last act
        return await claim(*args)

    gates.catalog.get_or_extend_reservation = put_then_claim  # type: ignore[method-assign]
    ex = execution(task())
    node = the_node(ex)
    info = await gates.gate.before_launch(ex, node)
    assert info is not None and info.phase is Phase.SUCCESS
    assert (node.record.outputs, node.record.cache_status) == ({"y": 9}, CacheStatus.HIT)
    assert node.record.reservation_status is ReservationStatus.RELEASED
    assert (await gates.reservations(), node.heartbeat_at) == ([], None)


async def test_a_retry_owns_the_reservation_of_its_earlier_attempt() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    node.record.attempt = 1
    gates.clock.advance(1)
    assert await gates.gate.before_launch(ex, node) is None
    assert gates.gate.owner_id(ex, node) == "ex1/n1@0"
    assert node.record.reservation_status is ReservationStatus.ACQUIRED
    assert await gates.reservations() == [("ex1/n1@0", T0 + 1 + HEARTBEAT * GRACE)]
    assert gates.waits == []


async def test_the_heartbeat_extends_only_when_it_is_due() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    gates.clock.advance(HEARTBEAT - 1)
    assert await gates.gate.heartbeat(ex, node) == T0 + HEARTBEAT
    assert await gates.reservations() == [("ex1/n1@0", T0 + HEARTBEAT * GRACE)]
    gates.clock.advance(1)  # exactly due
    assert await gates.gate.heartbeat(ex, node) == T0 + 2 * HEARTBEAT
    assert node.heartbeat_at == T0 + 2 * HEARTBEAT
    assert await gates.reservations() == [("ex1/n1@0", T0 + HEARTBEAT + HEARTBEAT * GRACE)]
    assert node.record.reservation_status is ReservationStatus.ACQUIRED


async def test_a_heartbeat_never_armed_here_extends_at_once() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    node.heartbeat_at = None  # loaded after a crash
    gates.clock.advance(1)
    assert await gates.gate.heartbeat(ex, node) == T0 + 1 + HEARTBEAT
    assert await gates.reservations() == [("ex1/n1@0", T0 + 1 + HEARTBEAT * GRACE)]


async def test_a_node_without_a_held_reservation_has_no_heartbeat() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    node.record.reservation_status = ReservationStatus.EXISTS
    assert await gates.gate.heartbeat(ex, node) is None
    assert await gates.reservations() == []


async def test_a_heartbeat_reports_a_lost_reservation_and_disarms() -> None:
    gates = Gates()
    owner, other = execution(task()), execution(task(), "ex2")
    node = the_node(owner)
    await gates.gate.before_launch(owner, node)
    gates.clock.advance(HEARTBEAT * GRACE)
    assert await gates.gate.before_launch(other, the_node(other)) is None  # taken over
    assert await gates.gate.heartbeat(owner, node) is None
    assert node.record.reservation_status is ReservationStatus.EXISTS
    assert node.heartbeat_at is None
    assert await gates.reservations() == [("ex2/n1@0", T0 + 2 * HEARTBEAT * GRACE)]
    # Driven to its end, it gives back nothing of the new owner's.
    node.record.outputs = {"y": 1}
    await gates.gate.after_attempt(owner, node, True)
    assert await gates.reservations() == [("ex2/n1@0", T0 + 2 * HEARTBEAT * GRACE)]
    assert node.record.reservation_status is ReservationStatus.RELEASED


async def test_a_heartbeat_that_cannot_reach_the_store_tries_again_in_a_second() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)

    async def down(*args: Any) -> Any:
        raise StoreError("down")

    gates.catalog.get_or_extend_reservation = down  # type: ignore[method-assign]
    gates.clock.advance(HEARTBEAT)
    assert await gates.gate.heartbeat(ex, node) == T0 + HEARTBEAT + 1.0
    assert node.heartbeat_at == T0 + HEARTBEAT + 1.0
    assert node.record.reservation_status is ReservationStatus.ACQUIRED


async def test_reverify_of_a_resumed_owner_extends_and_arms_the_heartbeat() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    resumed = execution(task())  # loaded from its record after a crash
    resumed_node = the_node(resumed)
    resumed_node.record.reservation_status = ReservationStatus.ACQUIRED
    gates.clock.advance(2)
    assert await gates.gate.reverify(resumed, resumed_node) is None
    assert resumed_node.heartbeat_at == T0 + 2 + HEARTBEAT
    assert resumed_node.record.reservation_status is ReservationStatus.ACQUIRED
    assert await gates.reservations() == [("ex1/n1@0", T0 + 2 + HEARTBEAT * GRACE)]


async def test_a_later_ownership_epoch_takes_over_the_reservation_at_once() -> None:
    """A takeover (or a restart) is a new ownership epoch: the node's reservation under the
    earlier epoch's name is taken over at once, never waited out, and the earlier owner then
    extends or releases a name nobody holds."""
    gates = Gates()
    earlier = execution(task())
    await gates.gate.before_launch(earlier, the_node(earlier))
    resumed = execution(task())
    resumed.record.owner_epoch = 1
    resumed_node = the_node(resumed)
    resumed_node.record.reservation_status = ReservationStatus.ACQUIRED
    gates.clock.advance(1)
    assert await gates.gate.reverify(resumed, resumed_node) is None
    assert await gates.reservations() == [("ex1/n1@1", T0 + 1 + HEARTBEAT * GRACE)]
    stale = the_node(earlier)
    assert await gates.gate.reverify(earlier, stale) == (
        "its cache reservation was taken over by ex1/n1"
    )
    await gates.gate.release(earlier, stale)
    assert await gates.reservations() == [("ex1/n1@1", T0 + 1 + HEARTBEAT * GRACE)]


async def test_reverify_of_a_resumed_owner_whose_reservation_was_taken_says_by_whom() -> None:
    gates = Gates()
    owner, other = execution(task()), execution(task(), "ex2")
    await gates.gate.before_launch(owner, the_node(owner))
    gates.clock.advance(HEARTBEAT * GRACE)
    await gates.gate.before_launch(other, the_node(other))
    node = the_node(owner)
    node.heartbeat_at = T0 + HEARTBEAT
    reason = await gates.gate.reverify(owner, node)
    assert reason == "its cache reservation was taken over by ex2/n1"
    assert node.record.reservation_status is ReservationStatus.EXISTS
    assert node.heartbeat_at is None
    assert await gates.reservations() == [("ex2/n1@0", T0 + 2 * HEARTBEAT * GRACE)]


async def test_reverify_of_a_node_holding_no_reservation_asks_nothing() -> None:
    gates = Gates()
    ex = execution(task())
    assert await gates.gate.reverify(ex, the_node(ex)) is None
    assert (await gates.reservations(), the_node(ex).heartbeat_at) == ([], None)


async def test_success_puts_the_outputs_then_releases_and_wakes_the_waiters() -> None:
    gates = Gates()
    woken: list[tuple[str, list[tuple[str, float]], bool]] = []
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)

    def on_wake(key: str) -> None:
        woken.append((key, list(gates.catalog._repo.reservations._rows), bool(woken)))  # type: ignore[attr-defined]

    gates.catalog.subscribe(on_wake)
    node.record.outputs = {"y": 3}
    await gates.gate.after_attempt(ex, node, True)
    assert [(key, rows) for key, rows, _ in woken] == [(KEY, [KEY]), (KEY, [])]  # put, release
    entry = await gates.catalog.get(KEY)
    assert entry is not None
    assert (entry.outputs, entry.task_name, entry.cache_version) == ({"y": 3}, "t", "v1")
    assert entry.source == CacheSource("ex1", "n1")
    assert node.record.cache_status is CacheStatus.POPULATED
    assert node.record.reservation_status is ReservationStatus.RELEASED
    assert (await gates.reservations(), node.heartbeat_at) == ([], None)


async def test_failure_releases_without_a_put() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    await gates.gate.after_attempt(ex, node, False)
    assert await gates.catalog.get(KEY) is None
    assert node.record.cache_status is CacheStatus.MISS
    assert node.record.reservation_status is ReservationStatus.RELEASED
    assert (await gates.reservations(), node.heartbeat_at) == ([], None)


async def test_a_hit_is_not_put_again() -> None:
    gates = Gates()
    await put(gates, {"y": 7}, CacheSource("ex0", "n1"))
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    await gates.gate.after_attempt(ex, node, True)
    assert node.record.cache_status is CacheStatus.HIT
    entry = await gates.catalog.get(KEY)
    assert entry is not None and entry.source == CacheSource("ex0", "n1")


async def test_a_stale_entry_is_replaced_by_the_next_success() -> None:
    gates = Gates()
    await put(gates, {"y": 7}, CacheSource("ex0", "n1"))
    gates.clock.advance(61)
    ex = execution(task(max_age=60))
    node = the_node(ex)
    assert await gates.gate.before_launch(ex, node) is None
    node.record.outputs = {"y": 8}
    await gates.gate.after_attempt(ex, node, True)
    entry = await gates.catalog.get(KEY)
    assert entry is not None and (entry.outputs, entry.created_at) == ({"y": 8}, T0 + 61)


async def test_overwrite_cache_skips_the_lookup_and_the_reservation_and_overwrites() -> None:
    gates = Gates()
    await put(gates, {"y": 7}, CacheSource("ex0", "n1"))
    ex = execution(task(), overwrite_cache=True)
    node = the_node(ex)
    assert await gates.gate.before_launch(ex, node) is None
    assert node.record.cache_status is CacheStatus.SKIPPED
    assert node.record.reservation_status is ReservationStatus.DISABLED
    assert await gates.reservations() == []
    node.record.outputs = {"y": 8}
    await gates.gate.after_attempt(ex, node, True)
    entry = await gates.catalog.get(KEY)
    assert entry is not None
    assert (entry.outputs, entry.source) == ({"y": 8}, CacheSource("ex1", "n1"))
    assert node.record.cache_status is CacheStatus.POPULATED


async def test_outputs_that_cannot_be_cached_are_a_put_failure_and_still_release() -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    await gates.gate.before_launch(ex, node)
    node.record.outputs = {"z": 1}  # not the interface's outputs
    await gates.gate.after_attempt(ex, node, True)
    assert node.record.cache_status is CacheStatus.PUT_FAILURE
    assert await gates.catalog.get(KEY) is None
    assert node.record.reservation_status is ReservationStatus.RELEASED
    assert await gates.reservations() == []


@pytest.mark.parametrize("status", [ReservationStatus.ACQUIRED, ReservationStatus.EXISTS])
async def test_an_unreachable_store_at_release_keeps_the_status_and_disarms(
    status: ReservationStatus,
) -> None:
    gates = Gates()
    ex = execution(task())
    node = the_node(ex)
    node.record.reservation_status = status
    node.heartbeat_at = T0

    async def down(*args: Any) -> Any:
        raise StoreError("down")

    gates.catalog.release_reservation = down  # type: ignore[method-assign]
    await gates.gate.release(ex, node)
    assert (node.record.reservation_status, node.heartbeat_at) == (status, None)


@pytest.mark.parametrize(
    "status", [ReservationStatus.DISABLED, ReservationStatus.RELEASED, ReservationStatus.FAILURE]
)
async def test_release_of_a_node_holding_no_reservation_asks_nothing(
    status: ReservationStatus,
) -> None:
    gates = Gates()
    owner, other = execution(task()), execution(task(), "ex2")
    await gates.gate.before_launch(owner, the_node(owner))
    node = the_node(other)
    node.record.reservation_status = status
    node.heartbeat_at = T0
    released: list[Any] = []

    async def record(*args: Any) -> bool:
        released.append(args)
        return False

    gates.catalog.release_reservation = record  # type: ignore[method-assign]
    await gates.gate.after_attempt(other, node, False)
    assert (released, node.record.reservation_status, node.heartbeat_at) == ([], status, T0)


async def test_a_reservation_expiring_within_the_second_says_0s() -> None:
    gates = Gates()
    owner, waiter = execution(task()), execution(task(), "ex2")
    await gates.gate.before_launch(owner, the_node(owner))
    gates.clock.advance(HEARTBEAT * GRACE - 0.4)
    info = await gates.gate.before_launch(waiter, the_node(waiter))
    assert info is not None and info.reason.endswith(
        "(its reservation expires in 0s unless extended)"
    )


class SnapshotEntries(MemoryEntries):
    """Entry reads that read at once but answer only when `go` is set, if `hold` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.go = asyncio.Event()

    async def get(self, key: str) -> CacheEntry | None:
        found = await super().get(key)
        if self.hold:
            await self.go.wait()
        return found


async def test_the_look_after_the_claim_never_joins_a_read_begun_before_it() -> None:
    # Another process put and released between our lookup and our claim, and its wake-up has
    # not arrived yet: a read of this process begun before that put must not answer for us.
    gates = Gates()
    entries = SnapshotEntries()
    gates.catalog._repo.entries = entries  # type: ignore[attr-defined]
    claim = gates.catalog.get_or_extend_reservation
    stale_reads: list[asyncio.Future[CacheEntry | None]] = []

    async def remote_put_then_claim(*args: Any) -> Any:
        entries.hold = True
        stale = asyncio.ensure_future(gates.catalog.get(KEY))  # another node's read, in flight
        for _ in range(3):
            await asyncio.sleep(0)
        await entries.insert(KEY, CacheEntry({"y": 4}, "t", "v1", CacheSource("ex0", "n1")))
        asyncio.get_running_loop().call_soon(entries.go.set)
        stale_reads.append(stale)
        return await claim(*args)

    gates.catalog.get_or_extend_reservation = remote_put_then_claim  # type: ignore[method-assign]
    ex = execution(task())
    info = await gates.gate.before_launch(ex, the_node(ex))
    assert info is not None and info.phase is Phase.SUCCESS
    assert the_node(ex).record.outputs == {"y": 4}
    assert await gates.reservations() == []
    assert await stale_reads[0] is None  # that read began before the put


async def test_a_heartbeat_of_a_node_loaded_after_a_crash_computes_its_key() -> None:
    gates = Gates()
    ex = execution(task())
    await gates.gate.before_launch(ex, the_node(ex))
    resumed = execution(task())  # a fresh state: no key computed, heartbeat never armed
    node = the_node(resumed)
    node.record.reservation_status = ReservationStatus.ACQUIRED
    gates.clock.advance(1)
    assert await gates.gate.heartbeat(resumed, node) == T0 + 1 + HEARTBEAT
    assert (node.cache_key, await gates.reservations()) == (
        KEY,
        [("ex1/n1@0", T0 + 1 + HEARTBEAT * GRACE)],
    )


async def test_a_herd_of_lookups_of_one_key_shares_one_read() -> None:
    gates = Gates()
    entries = HeldEntries()
    gates.catalog._repo.entries = entries  # type: ignore[attr-defined]
    herd = [execution(task(serialize=False), f"ex{i}") for i in range(3)]
    lookups = [asyncio.ensure_future(gates.gate.before_launch(ex, the_node(ex))) for ex in herd]
    for _ in range(3):
        await asyncio.sleep(0)
    entries.go.set()
    assert await asyncio.gather(*lookups) == [None, None, None]
    assert entries.reads == 1
