"""A waiting node's waits are read as they are now: when the waiters ahead of it leave, its
position moves up at the next read, though its stored reason still says what it was when it
was last refused (issue: a lone waiter still said `position 3`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sluice.config import load_config
from sluice.resources.models import Claim, Holder
from sluice.runtime import Runtime
from sluice.service import convert, inventory, waits
from sluice.service import models as m
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.records import ExecutionRecord, NodeRecord

WAITING_FOR_RESOURCES = 2


@pytest.fixture
async def runtime(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(load_config(database_url=sqlite_url, resources={"quotas": {"wh": 1}}))
    await rt.resources.start()
    yield rt
    await rt.close()


async def claim(rt: Runtime, execution: str, node: str) -> str:
    token = f"ex:p:d:{execution}-{node}"
    await rt.resources.allocate(token, [Claim("wh", 1)], Holder("p", "d", execution, node))
    return token


def waiting_view(execution: str, node: str) -> m.Execution:
    record = ExecutionRecord(execution, "p", "d", "wf", "1", ExecutionPhase.RUNNING, {}, 0.0, 0.0)
    stored = NodeRecord(
        execution,
        node,
        phase=NodePhase.RUNNING,
        task_phase=WAITING_FOR_RESOURCES,
        reason="waiting for wh: 1/1 in use, position 3",
    )
    return convert.execution(record, [convert.node_execution(stored, None, None, [])], [], 0.0)


async def test_a_lone_waiters_position_is_read_as_it_is_now(runtime: Runtime) -> None:
    await claim(runtime, "x0", "held")
    ahead = [await claim(runtime, f"x{i}", "n") for i in (1, 2)]
    await claim(runtime, "x3", "n")
    before = (await waits.with_waits(runtime, waiting_view("x3", "n"))).nodes[0]
    assert [w.position for w in before.waiting_for] == [3]
    for token in ahead:  # the two ahead of it stop waiting (aborted)
        await runtime.resources.release(token, ["wh"])
    after = (await waits.with_waits(runtime, waiting_view("x3", "n"))).nodes[0]
    assert after.reason.endswith("position 3"), "the stored reason is as it was"
    assert after.live_reason == "waiting for wh: 1/1 in use (held by x0/held), position 1"


async def test_a_node_not_waiting_is_left_as_it_is(runtime: Runtime) -> None:
    view = waiting_view("x9", "n")
    done = view.model_copy(
        update={"nodes": [view.nodes[0].model_copy(update={"task_phase": "SUCCESS"})]}
    )
    assert await waits.with_waits(runtime, done) == done


async def test_the_live_attempt_says_the_same_position_as_the_node(runtime: Runtime) -> None:
    """Issue 26: the node table said 5, the attempt row 6, the queue line 3. The attempt
    row now reads the same live wait as the node and the quota views."""
    await claim(runtime, "x0", "held")
    ahead = await claim(runtime, "x1", "n")
    await claim(runtime, "x3", "n")
    view = waiting_view("x3", "n")
    stale = m.Attempt(attempt=1, phase="WAITING_FOR_RESOURCES", reason="position 6", live=True)
    node = view.nodes[0].model_copy(update={"attempts": [stale]})
    view = view.model_copy(update={"nodes": [node]})
    await runtime.resources.release(ahead, ["wh"])
    shown = (await waits.with_waits(runtime, view)).nodes[0]
    (quota,) = [q for q in await inventory.quotas(runtime, "wh")]
    (waiter,) = [w for w in quota.waiters if w.execution_id == "x3"]
    assert shown.waiting_for[0].position == waiter.position == 1
    assert shown.attempts[0].reason == shown.live_reason
    assert shown.live_reason.endswith("position 1")


def test_what_holds_a_waiter_back_is_said_in_words() -> None:
    def text(scope: str, in_use: int = 1) -> str:
        return m.Wait(
            namespace="wh", in_use=in_use, quota=1, holders=[], position=2, blocking_scope=scope
        ).text

    assert "global" not in text("global") and text("global").endswith("position 2")
    assert text("project").endswith("held back by the project's cap on this quota")
    assert m.held_back_by("global", 1, 1) == "every unit is in use"
    assert m.held_back_by("global", 0, 1) == "older claims go first"
