"""flytekit constructs on sluice, each compared with flytekit's own local execution of the same
workflow (a plain call in this process): dataclasses, pydantic models and untyped dicts,
attribute access on promises, checkpoints across retries, ImageSpec guards, @eager, echo
tasks in a branch, legacy Pod (sidecar) tasks and maps over them, hashed outputs as cache
keys, and gates answered through the service and the HTTP API.

One engine serves the whole module (tests/support/flyte_engine.py): its flyte worker
imports flytekit once, so a run costs milliseconds."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sluice.clock import FakeClock
from sluice.config import ConcurrencyConfig
from sluice.errors import InputError, InvalidArgumentError
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.schedules import ScheduleRunner
from sluice.runtime import resolve_target
from sluice.service import Sluice
from support.engine import Outcome, outcome
from support.flyte import FLOWS_ROOT, history
from support.flyte_engine import FlyteEngine, flyte_engine
from support.http_world import client_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

if str(FLOWS_ROOT) not in sys.path:
    sys.path.insert(0, str(FLOWS_ROOT))

from flyteconstructs import gates, relative, runtime, shapes  # noqa: E402


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def flyte(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FlyteEngine]:
    directory = tmp_path_factory.mktemp("constructs")
    previous = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    os.environ["SLUICE_FLYTE_TEST_DIR"] = str(directory)  # the worker records bodies there
    try:
        async for engine in flyte_engine(directory):
            yield engine
    finally:
        if previous is None:
            os.environ.pop("SLUICE_FLYTE_TEST_DIR", None)
        else:
            os.environ["SLUICE_FLYTE_TEST_DIR"] = previous


def _json(value: Any) -> Any:
    """flytekit's local output as JSON: named tuples as o0, o1...; dataclasses as dicts."""
    import dataclasses

    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {f"o{i}": _json(v) for i, v in enumerate(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _outputs(outcome: Outcome) -> dict[str, Any]:
    assert outcome.record.phase.value == "SUCCEEDED", (outcome.record.error, outcome.nodes)
    return outcome.record.outputs or {}


def _same_as_flytekit(outcome: Outcome, local: Any) -> None:
    found = _outputs(outcome)
    expected = _json(local)
    assert found == (
        expected if isinstance(expected, dict) and "o0" in expected else {"o0": expected}
    )


async def test_dataclass_and_pydantic_values_cross_tasks_and_come_out_as_flytekit_gives_them(
    flyte: FlyteEngine,
) -> None:
    found = await flyte.run(shapes.boxes, label="cube", n=3)
    _same_as_flytekit(found, shapes.boxes(label="cube", n=3))
    assert _outputs(found)["o2"] == {"label": "cube", "sizes": [1, 2, 3], "extra": {"w": 1.5}}


async def test_attribute_access_on_promises_reads_fields_indexes_and_keys(
    flyte: FlyteEngine,
) -> None:
    found = await flyte.run(shapes.attributes, n=4)
    _same_as_flytekit(found, shapes.attributes(n=4))
    inputs = found.nodes["n4"].inputs  # add(a=listed[1], b=table["high"])
    assert inputs == {"a": 41.0, "b": 400.0}


async def test_a_dataclass_workflow_input_and_an_attribute_of_it(flyte: FlyteEngine) -> None:
    box = {"label": "lid", "sizes": [2, 5], "extra": {}}
    found = await flyte.run(shapes.attribute_of_input, box=box)
    local = shapes.attribute_of_input(box=shapes.Box(label="lid", sizes=[2, 5]))
    _same_as_flytekit(found, local)


async def test_an_untyped_dict_crosses_as_json(flyte: FlyteEngine) -> None:
    counts = {"a": 1, "b": 2, "tag": "x"}
    found = await flyte.run(shapes.untyped, counts=counts)
    _same_as_flytekit(found, shapes.untyped(counts=counts))


async def test_a_module_with_relative_imports_runs(flyte: FlyteEngine) -> None:
    found = await flyte.run(relative.first_plus_last, n=2)
    _same_as_flytekit(found, relative.first_plus_last(n=2))


async def test_a_checkpoint_written_by_one_attempt_is_read_by_the_next(flyte: FlyteEngine) -> None:
    found = await flyte.run(runtime.resumable, n=3)
    assert _outputs(found) == {"o0": "reached 3 after a restart"}
    assert found.nodes["n0"].attempt == 2  # three attempts, each one step further
    assert runtime.resumable(n=1) == "reached 1 after no restart"  # flytekit: nothing to read


async def test_image_spec_is_container_in_the_task_and_its_import_guard(flyte: FlyteEngine) -> None:
    found = await flyte.run(runtime.in_image, text="a")
    # as in the image built from the spec; flytekit's local run says False inside the task
    assert _outputs(found) == {"o0": '{"text": "a", "container": true}'}


async def test_an_eager_workflow_runs_its_tasks_as_flytekit_runs_them_locally(
    flyte: FlyteEngine,
) -> None:
    found = await flyte.run(runtime.double_then_square, x=6)  # calls double, then square
    _same_as_flytekit(found, await runtime.double_then_square(x=6))


async def test_an_echo_task_in_a_branch_passes_its_input_through(flyte: FlyteEngine) -> None:
    for x in (3, 7):
        found = await flyte.run(runtime.maybe_double, x=x)
        _same_as_flytekit(found, runtime.maybe_double(x=x))


async def test_a_legacy_pod_task_and_a_map_over_it_run_as_python_tasks(flyte: FlyteEngine) -> None:
    found = await flyte.run(runtime.pods, xs=[1, 2, 3])
    _same_as_flytekit(found, runtime.pods(xs=[1, 2, 3]))


async def test_a_hashed_output_makes_the_cached_consumer_hit_on_a_second_run(
    flyte: FlyteEngine,
) -> None:
    first = await flyte.run(runtime.report_words, text="one two three")
    second = await flyte.run(runtime.report_words, text="one two three")
    assert _outputs(first) == _outputs(second) == {"o0": 3}
    assert first.nodes["n0"].outputs != second.nodes["n0"].outputs  # a new file each run...
    assert [first.nodes["n1"].cache_status, second.nodes["n1"].cache_status] == [
        "POPULATED",
        "HIT",
    ]  # ...of the same content: the key is its hash
    runs = history(Path(os.environ["SLUICE_FLYTE_TEST_DIR"]))
    assert runs.count("count_words") == 1 and runs.count("write_report") == 2


async def test_a_sleep_gate_waits_then_the_workflow_goes_on(flyte: FlyteEngine) -> None:
    found = await flyte.run(gates.napping, x=2)
    _same_as_flytekit(found, gates.napping(x=2))
    nap = found.nodes["n0"]
    assert nap.ended_at is not None and nap.started_at is not None
    assert nap.ended_at - nap.started_at >= 1.0  # the sleep's own duration, not a timing claim


async def _waiting(service: Sluice, execution_id: str, node: str) -> str:
    for _ in range(600):
        shown = await service.execution(execution_id)
        reasons = {n.node: n.reason for n in shown.nodes if n.phase == "RUNNING"}
        if node in reasons and reasons[node].startswith("waiting for"):
            return reasons[node]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{node} never waited: {shown.nodes}")


async def test_input_and_approval_gates_wait_and_are_answered_by_the_service_and_the_api(
    flyte: FlyteEngine,
) -> None:
    service = Sluice(flyte.runtime)
    record = await flyte.runtime.launch(gates.asking, {"x": 2})
    assert await _waiting(service, record.id, "n0") == "waiting for input 'factor' (int)"
    with pytest.raises(InputError, match=r"factor.*expected int"):
        await service.signal(record.id, "n0", "five")
    with pytest.raises(InvalidArgumentError, match=r"n2.*NOT_STARTED"):
        await service.signal(record.id, "n2", True)
    await service.signal(record.id, "n0", 5)
    with pytest.raises(InvalidArgumentError, match=r"signalled already|SUCCEEDED"):
        await service.signal(record.id, "n0", 6)
    assert await _waiting(service, record.id, "n2") == "waiting for approval 'publish'"
    async with client_for(service) as client:
        shown = (await client.get(f"/api/v1/executions/{record.id}")).json()
        reasons = {n["node"]: n["reason"] for n in shown["nodes"]}
        assert reasons["n2"] == "waiting for approval 'publish'"
        answer = await client.post(
            f"/api/v1/executions/{record.id}/nodes/n2/signal", json={"value": True}
        )
        assert answer.status_code == 201, answer.text
        refused = await client.post(
            f"/api/v1/executions/{record.id}/nodes/n1/signal", json={"value": 1}
        )
        assert refused.status_code == 422  # n1 is a task, not a gate
    await service.signal(record.id, "n3", "total")
    await flyte.engine.wait(record.id)
    final = await service.execution(record.id, events=True)
    assert (final.phase, final.outputs) == ("SUCCEEDED", {"o0": "total:10"})
    signals = [(e.node_id, e.info) for e in final.events if e.phase == "SIGNALED"]
    assert signals == [("n0", {"value": 5}), ("n2", {"value": True}), ("n3", {"value": "total"})]


async def test_a_rejected_approval_and_an_unanswered_input_fail_their_gate(
    flyte: FlyteEngine,
) -> None:
    service = Sluice(flyte.runtime)
    late = await flyte.runtime.launch(gates.impatient, {"x": 1})  # its input times out (2 s)
    record = await flyte.runtime.launch(gates.asking, {"x": 1})
    await _waiting(service, record.id, "n0")
    await service.signal(record.id, "n0", 1)
    await _waiting(service, record.id, "n2")
    await service.signal(record.id, "n2", False)
    await flyte.engine.wait(record.id)
    rejected = await service.execution(record.id)
    gate = {n.node: n for n in rejected.nodes}["n2"]
    assert (rejected.phase, gate.phase) == ("FAILED", "FAILED")
    assert gate.error is not None and "approval 'publish' was rejected" in gate.error["message"]
    await flyte.engine.wait(late.id)
    timed_out = {n.node: n for n in (await service.execution(late.id)).nodes}["n0"]
    assert timed_out.error is not None and timed_out.error["code"] == "GateTimedOut"


async def test_on_failure_runs_with_the_failure_and_is_skipped_on_success(
    flyte: FlyteEngine,
) -> None:
    work = Path(os.environ["SLUICE_FLYTE_TEST_DIR"])
    ok = await flyte.run(runtime.guarded, x=1)
    _same_as_flytekit(ok, runtime.guarded(x=1))
    assert ok.nodes["fn0"].phase.value == "SKIPPED"
    assert not [r for r in history(work) if r.startswith("clean_up")]

    failed = await flyte.run(runtime.guarded, x=-5)
    assert failed.record.phase.value == "FAILED"
    assert failed.record.error is not None and failed.record.error["node"] == "n0"  # not fn0
    assert (failed.nodes["n1"].phase.value, failed.nodes["fn0"].phase.value) == (
        "SKIPPED",
        "SUCCEEDED",
    )
    assert failed.nodes["fn0"].inputs is not None
    err = failed.nodes["fn0"].inputs["err"]
    assert err["failed_node_id"] == "n0" and "ValueError: x is -5" in err["message"]
    ran = [r for r in history(work) if r.startswith("clean_up")]
    assert ran == ["clean_up--5-n0"]
    with pytest.raises(ValueError, match="x is -5"):  # flytekit: the handler runs, then raises
        runtime.guarded(x=-5)
    assert [r for r in history(work) if r.startswith("clean_up")][1] == "clean_up--5-fn0"


async def test_a_cron_schedule_sets_its_kickoff_time_input_at_each_firing(
    flyte: FlyteEngine,
) -> None:
    rt = flyte.runtime
    workflow, plan = resolve_target(runtime.kicked)
    assert plan is not None and plan.schedule is not None
    assert (plan.schedule.cron, plan.schedule.kickoff_input) == ("*/5 * * * *", "at")
    plans = LaunchPlanService(rt.store, rt.notifier, rt.clock, rt.settings.project, "kickoff")
    await plans.register(plan, workflow, activate=True)
    later = FakeClock(rt.clock.now() + 600)  # two firings of every 5 minutes are due
    scheduler = ScheduleRunner(rt.store, rt.notifier, later, ConcurrencyConfig(catch_up="latest"))
    (fired,) = await scheduler.fire_due()
    await flyte.engine.wait(fired.id)
    found = await outcome(rt, fired.id)
    at = datetime.fromtimestamp(fired.scheduled_at or 0, UTC)
    assert at.minute % 5 == 0 and at.second == 0
    assert _outputs(found) == {"o0": f"nightly at {at.isoformat()}"}
    assert runtime.stamped(at=at) == f"nightly at {at.isoformat()}"  # flytekit, given that time
