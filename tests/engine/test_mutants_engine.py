"""Tests written to kill surviving mutants of the task handler (docs/mutation.md).

Each test drives one TaskHandler decision in process, on stand-ins for the execution, the node
and the engine's scheduling side: the retry rule and its back-off, a task's time-out, the bound
on a plugin call, finalize and abort. No engine, store or plugin process is started.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.clock import FakeClock
from sluice.config import EngineConfig
from sluice.engine.calls import PluginCallTimeout
from sluice.engine.handler import TaskHandler
from sluice.plugins.core.phase import ErrorKind, ExecutionError, Phase, PhaseInfo
from sluice.spec.models import TaskMetadata, TaskSpec
from sluice.spec.phases import NodePhase
from sluice.store.records import NodeRecord

NOW = 1_700_000_000.0


@dataclass
class FakeNode:
    record: NodeRecord
    task: TaskSpec
    admitted: bool = False
    queued: bool = False
    context: Any = None

    @property
    def id(self) -> str:
        return self.record.node_id


@dataclass
class FakeExecution:
    id: str = "ex1"
    events: list[Any] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def mark_changed(self, node: FakeNode) -> None:
        self.changed.append(node.id)


@dataclass
class FakeScheduling:
    wakes: list[tuple[str, str, float]] = field(default_factory=list)
    released: list[tuple[str, str]] = field(default_factory=list)

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None:
        self.wakes.append((execution_id, node_id, when))

    def release_admission(self, execution_id: str, node_id: str) -> None:
        self.released.append((execution_id, node_id))


@dataclass
class Recorder:
    """Stands in for the handler's plugin calls, the claims gate and the cache gate."""

    calls: list[str] = field(default_factory=list)
    on: set[tuple[int, int]] = field(default_factory=set)
    """(id(execution), id(node)) of every call: each call was for the node at hand."""

    async def call(self, ex: Any, node: Any, method: str) -> None:
        self.calls.append(method)
        self.on.add((id(ex), id(node)))

    async def release(self, ex: Any, node: Any) -> None:
        self.calls.append("release")
        self.on.add((id(ex), id(node)))


def make_handler(
    clock: FakeClock | None = None, **config: Any
) -> tuple[TaskHandler, FakeScheduling]:
    services = SimpleNamespace(
        config=EngineConfig(**config), clock=clock or FakeClock(NOW), counters=None, logs=None
    )
    scheduling = FakeScheduling()
    return TaskHandler(services, scheduling), scheduling  # type: ignore[arg-type]


def make_node(*, retries: int = 0, timeout: float | None = None, **record: Any) -> FakeNode:
    task = TaskSpec(name="t", version="1", metadata=TaskMetadata(retries=retries, timeout=timeout))
    return FakeNode(NodeRecord(execution_id="ex1", node_id="n1", **record), task)


def user_failure(message: str = "boom") -> PhaseInfo:
    return PhaseInfo.retryable_failure("E", message)


def system_failure(message: str = "lost") -> PhaseInfo:
    return PhaseInfo.retryable_failure("S", message, ErrorKind.SYSTEM)


# _may_retry: user retries count attempts that were not system failures; system failures
# have their own budget.


@pytest.mark.parametrize(
    ("attempt", "system_failures", "retries", "expected"),
    [
        (0, 0, 0, False),
        (0, 0, 1, True),
        (1, 0, 1, False),
        (2, 1, 2, True),
        (3, 1, 2, False),
    ],
)
def test_a_user_failure_retries_while_user_attempts_are_below_retries(
    attempt: int, system_failures: int, retries: int, expected: bool
) -> None:
    handler, _ = make_handler()
    node = make_node(retries=retries, attempt=attempt, system_failures=system_failures)
    assert handler._may_retry(node, user_failure()) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("system_failures", "expected"), [(0, True), (2, True), (3, False)])
def test_a_system_failure_retries_while_below_max_system_failures(
    system_failures: int, expected: bool
) -> None:
    handler, _ = make_handler(max_system_failures=3)
    node = make_node(retries=0, attempt=system_failures, system_failures=system_failures)
    assert handler._may_retry(node, system_failure()) is expected  # type: ignore[arg-type]


def test_a_failure_without_error_counts_against_user_retries() -> None:
    handler, _ = make_handler(max_system_failures=5)
    node = make_node(retries=1, attempt=1)
    assert handler._may_retry(node, PhaseInfo(Phase.RETRYABLE_FAILURE, 0, "x")) is False  # type: ignore[arg-type]


# _schedule_retry: exponential back-off capped at backoff_max, and a clean next attempt.


@pytest.mark.parametrize(
    ("attempt", "delay"), [(0, 2.0), (1, 4.0), (2, 8.0), (3, 16.0), (4, 20.0), (9, 20.0)]
)
def test_the_retry_back_off_doubles_per_attempt_up_to_its_cap(attempt: int, delay: float) -> None:
    handler, scheduling = make_handler(backoff_base=2.0, backoff_max=20.0)
    ex, node = FakeExecution(), make_node(retries=10, attempt=attempt)
    handler._schedule_retry(ex, node, user_failure(), NOW)  # type: ignore[arg-type]
    assert node.record.next_attempt_at == NOW + delay
    assert scheduling.wakes == [("ex1", "n1", NOW + delay)]
    assert node.record.reason == f"retrying in {delay:.1f}s after: boom"


def test_a_retry_resets_the_attempt_and_keeps_the_error() -> None:
    handler, _ = make_handler(backoff_base=1.0, backoff_max=1.0)
    ex = FakeExecution()
    node = make_node(
        retries=3,
        attempt=1,
        plugin_state={"k": 1},
        plugin_state_version=4,
        task_phase=int(Phase.RETRYABLE_FAILURE),
        phase_version=2,
        attempt_started_at=NOW - 5,
        outputs={"o": 1},
    )
    handler._schedule_retry(ex, node, user_failure("first\nlast line  \n"), NOW)  # type: ignore[arg-type]
    rec = node.record
    assert rec.attempt == 2
    assert rec.system_failures == 0
    assert rec.error == {"code": "E", "message": "first\nlast line  \n", "kind": "USER"}
    assert (rec.plugin_state, rec.plugin_state_version) == (None, 0)
    assert (rec.task_phase, rec.phase_version) == (int(Phase.UNDEFINED), 0)
    assert (rec.attempt_started_at, rec.outputs) == (None, None)
    assert rec.reason == "retrying in 1.0s after: last line"
    assert ex.changed == ["n1"]


@pytest.mark.parametrize("before", [0, 2])
def test_a_system_failure_retry_counts_one_more_system_failure(before: int) -> None:
    handler, _ = make_handler()
    node = make_node(attempt=before + 1, system_failures=before)
    handler._schedule_retry(FakeExecution(), node, system_failure(), NOW)  # type: ignore[arg-type]
    assert (node.record.attempt, node.record.system_failures) == (before + 2, before + 1)
    assert node.record.error is not None and node.record.error["kind"] == "SYSTEM"


def test_a_retry_without_error_says_why_from_the_reason() -> None:
    handler, _ = make_handler(backoff_base=1.0, backoff_max=1.0)
    node = make_node(attempt=0)
    info = PhaseInfo(Phase.RETRYABLE_FAILURE, 0, "  pod evicted\n")
    handler._schedule_retry(FakeExecution(), node, info, NOW)  # type: ignore[arg-type]
    assert node.record.error is None
    assert node.record.reason == "retrying in 1.0s after: pod evicted"


def test_a_retry_says_why_from_the_error_message_not_the_reason() -> None:
    handler, _ = make_handler(backoff_base=1.0, backoff_max=1.0)
    node = make_node(attempt=0)
    error = ExecutionError("E", "disk full")
    info = PhaseInfo(Phase.RETRYABLE_FAILURE, 0, "attempt failed", error=error)
    handler._schedule_retry(FakeExecution(), node, info, NOW)  # type: ignore[arg-type]
    assert node.record.reason == "retrying in 1.0s after: disk full"


def test_a_retry_after_a_blank_message_says_failure() -> None:
    handler, _ = make_handler(backoff_base=1.0, backoff_max=1.0)
    node = make_node(attempt=0)
    handler._schedule_retry(FakeExecution(), node, user_failure("   "), NOW)  # type: ignore[arg-type]
    assert node.record.reason == "retrying in 1.0s after: failure"


# _time_out: the plugin is aborted and the attempt fails as a retryable Timeout.


async def test_a_timed_out_task_is_aborted_and_fails_retryably() -> None:
    handler, _ = make_handler()
    recorder, applied = Recorder(), []

    async def apply(ex: Any, node: Any, info: PhaseInfo) -> None:
        applied.append(info)

    handler.plugins.call = recorder.call  # type: ignore[method-assign]
    handler.apply = apply  # type: ignore[method-assign]
    await handler._time_out(FakeExecution(), make_node(timeout=7.5))  # type: ignore[arg-type]
    assert recorder.calls == ["abort"]
    [info] = applied
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert (info.error.code, info.error.kind) == ("Timeout", ErrorKind.USER)
    assert info.error.message == "task timed out after 7.5s"


@pytest.mark.parametrize(
    ("started_ago", "now_offset", "expected"),
    [(None, 0.0, False), (10.0, -0.001, False), (10.0, 0.0, True), (10.0, 1.0, True)],
)
def test_a_task_times_out_at_its_deadline(
    started_ago: float | None, now_offset: float, expected: bool
) -> None:
    handler, _ = make_handler()
    started = None if started_ago is None else NOW - started_ago
    node = make_node(timeout=10.0, attempt_started_at=started)
    assert handler._timed_out(node, NOW + now_offset) is expected  # type: ignore[arg-type]


# _limit and _bounded: a plugin call gets the cap, or the time left to the task when less.


@pytest.mark.parametrize(
    ("timeout", "elapsed", "method", "expected"),
    [
        (None, 0.0, "handle", (60.0, False)),
        (100.0, 10.0, "handle", (60.0, False)),
        (70.0, 10.0, "handle", (60.0, False)),
        (30.0, 10.0, "handle", (20.0, True)),
        (30.0, 30.0, "handle", (0.0, True)),
        (30.0, 40.0, "handle", (0.0, True)),
        (30.0, 30.0, "abort", (60.0, False)),
        (30.0, 40.0, "finalize", (60.0, False)),
    ],
)
def test_a_plugin_call_gets_the_cap_or_the_time_left(
    timeout: float | None, elapsed: float, method: str, expected: tuple[float, bool]
) -> None:
    clock = FakeClock(NOW)
    handler, _ = make_handler(clock, plugin_call_timeout=60.0)
    node = make_node(timeout=timeout, attempt_started_at=NOW)
    clock.advance(elapsed)
    assert handler.plugins.limit(node, method) == expected  # type: ignore[arg-type]


async def test_a_call_past_the_deadline_is_refused_without_running() -> None:
    clock = FakeClock(NOW)
    handler, _ = make_handler(clock)
    node = make_node(timeout=5.0, attempt_started_at=NOW)
    clock.advance(5.0)
    ran = []

    async def call() -> str:
        ran.append(1)
        return "x"

    with pytest.raises(PluginCallTimeout) as caught:
        await handler.plugins.bounded(node, "handle", call)  # type: ignore[arg-type]
    assert (caught.value.method, caught.value.seconds, caught.value.by_task_timeout) == (
        "handle",
        0.0,
        True,
    )
    assert ran == []


async def test_a_call_within_its_bound_returns_its_result() -> None:
    handler, _ = make_handler()

    async def call() -> str:
        return "done"

    assert await handler.plugins.bounded(make_node(), "handle", call) == "done"  # type: ignore[arg-type]


async def test_an_overrunning_call_is_cancelled_and_reported() -> None:
    handler, _ = make_handler(plugin_call_timeout=0.01)
    cancelled = asyncio.Event()

    async def call() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(PluginCallTimeout) as caught:
        await handler.plugins.bounded(make_node(), "abort", call)  # type: ignore[arg-type]
    assert (caught.value.method, caught.value.seconds, caught.value.by_task_timeout) == (
        "abort",
        0.01,
        False,
    )
    assert cancelled.is_set()
    assert handler.plugins.calls.abandoned == set()


async def test_an_overrun_failing_on_cancel_still_reports_the_timeout() -> None:
    handler, _ = make_handler(plugin_call_timeout=0.01)

    async def call() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    with pytest.raises(PluginCallTimeout):
        await handler.plugins.bounded(make_node(), "finalize", call)  # type: ignore[arg-type]


async def test_a_call_swallowing_its_cancellation_is_abandoned_not_awaited() -> None:
    handler, _ = make_handler(plugin_call_timeout=0.01)
    let_go = asyncio.Event()

    async def stubborn() -> None:
        while not let_go.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await let_go.wait()

    try:
        with pytest.raises(PluginCallTimeout):
            # A bound on liveness, not a timing assertion: _bounded must give up on the call.
            await asyncio.wait_for(handler.plugins.bounded(make_node(), "handle", stubborn), 10)
        [future] = handler.plugins.calls.abandoned
        assert not future.done()
    finally:
        let_go.set()  # the stubborn call ends, whatever happened above
    await asyncio.wait({future}, timeout=10)
    await asyncio.sleep(0)
    assert handler.plugins.calls.abandoned == set()


# finalize and abort


def _wired(handler: TaskHandler) -> Recorder:
    recorder = Recorder()
    handler.plugins.call = recorder.call  # type: ignore[method-assign]
    handler.claims = recorder  # type: ignore[assignment]
    handler.cache = recorder  # type: ignore[assignment]
    return recorder


@pytest.mark.parametrize(
    ("admitted", "queued", "started", "calls", "released"),
    [
        (True, False, None, ["finalize", "release"], True),
        (False, True, None, ["release"], True),
        (False, False, NOW, ["finalize", "release"], False),
        (False, False, None, ["release"], False),
    ],
)
async def test_finalize_frees_the_slot_and_the_claims(
    admitted: bool, queued: bool, started: float | None, calls: list[str], released: bool
) -> None:
    handler, scheduling = make_handler()
    recorder = _wired(handler)
    node = make_node(attempt_started_at=started)
    node.admitted, node.queued = admitted, queued
    ex = FakeExecution()
    await handler.finalize(ex, node)  # type: ignore[arg-type]
    assert recorder.calls == calls
    assert recorder.on == {(id(ex), id(node))}
    assert scheduling.released == ([("ex1", "n1")] if released else [])
    assert (node.admitted, node.queued) == (False, False)


async def test_finalize_calls_the_plugin_of_a_node_with_plugin_state() -> None:
    handler, _ = make_handler()
    recorder = _wired(handler)
    node = make_node(plugin_state={"pod": "p"})
    await handler.finalize(FakeExecution(), node)  # type: ignore[arg-type]
    assert recorder.calls == ["finalize", "release"]


async def test_aborting_a_node_that_never_started_skips_it() -> None:
    handler, _ = make_handler()
    recorder = _wired(handler)
    ex, node = FakeExecution(), make_node()
    await handler.abort(ex, node, "upstream failed")  # type: ignore[arg-type]
    assert recorder.calls == []
    assert node.record.phase is NodePhase.SKIPPED
    assert node.record.ended_at == NOW
    [event] = ex.events
    assert (event.phase, event.phase_version, event.reason) == (
        "ABORTED",
        0,
        "skipped: upstream failed",
    )


@pytest.mark.parametrize("phase", [NodePhase.SUCCEEDED, NodePhase.FAILED, NodePhase.SKIPPED])
async def test_aborting_a_finished_node_changes_nothing(phase: NodePhase) -> None:
    handler, _ = make_handler()
    recorder = _wired(handler)
    ex, node = FakeExecution(), make_node(phase=phase, next_attempt_at=NOW + 3)
    await handler.abort(ex, node, "stop")  # type: ignore[arg-type]
    assert (recorder.calls, ex.events, node.record.phase) == ([], [], phase)
    assert node.record.next_attempt_at == NOW + 3


async def test_aborting_a_running_node_stops_its_plugin_and_gives_everything_back() -> None:
    handler, scheduling = make_handler()
    recorder = _wired(handler)
    ex = FakeExecution()
    node = make_node(phase=NodePhase.RUNNING, attempt_started_at=NOW - 1)
    node.admitted = True
    await handler.abort(ex, node, "user asked")  # type: ignore[arg-type]
    # abort and finalize of the plugin, the claims released, then the cache reservation.
    assert recorder.calls == ["abort", "finalize", "release", "release"]
    assert recorder.on == {(id(ex), id(node))}
    assert scheduling.released == [("ex1", "n1")]
    assert node.record.phase is NodePhase.ABORTED
    assert node.record.ended_at == NOW
    [event] = ex.events
    assert (event.phase, event.phase_version, event.reason) == ("ABORTED", 0, "user asked")


async def test_aborting_a_node_waiting_for_its_retry_cancels_the_retry() -> None:
    handler, _ = make_handler()
    recorder = _wired(handler)
    node = make_node(phase=NodePhase.RUNNING, attempt=1, next_attempt_at=NOW + 10)
    await handler.abort(FakeExecution(), node, "stop")  # type: ignore[arg-type]
    assert recorder.calls == ["release", "release"]  # never launched: no plugin call
    assert node.record.next_attempt_at is None
    assert node.record.phase is NodePhase.ABORTED
