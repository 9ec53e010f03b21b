"""Rate limits in the engine: a task waits for its key's slot (with a reason naming it and its
place), right before its launch; a cache hit takes no slot; a failed attempt's slot is spent;
a limit nobody set fails the task naming it. The window is judged on the store's own times,
which every RATE_ADMITTED event carries."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase, NodePhase
from support.engine import fast_settings, outcome, run

FLOWS = Path(__file__).parent / "rate_flows.py"


@pytest.fixture
def rate_flows() -> ModuleType:
    return load_module("rate_flows", str(FLOWS))


async def _open(sqlite_url: str, rate: str) -> Runtime:
    engine = fast_settings(sqlite_url).engine.model_dump()
    resources = {"rate_limits": {"api": rate}}
    return await Runtime.open(
        load_config(database_url=sqlite_url, engine=engine, resources=resources)
    )


@pytest.fixture
async def two_per_second(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await _open(sqlite_url, "2/s")
    yield rt
    await rt.close()


@pytest.fixture
async def one_per_hour(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await _open(sqlite_url, "1/hour")
    yield rt
    await rt.close()


def most_in_a_window(times: list[float], period: float) -> int:
    times = sorted(times)
    best, start = 0, 0
    for end in range(len(times)):
        while times[end] - times[start] >= period - 1e-9:
            start += 1
        best = max(best, end - start + 1)
    return best


def admissions(events: list[object]) -> dict[str, list[float]]:
    """Store times of the RATE_ADMITTED events, per rate limit key."""
    found: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if getattr(event, "phase", "") == "RATE_ADMITTED":
            info = event.info
            for label in info["rate_limits"]:
                found[label].append(info["store_time"])
    return found


async def test_tasks_wait_for_their_keys_slot_and_say_so(
    two_per_second: Runtime, rate_flows: ModuleType
) -> None:
    rt = two_per_second
    record = await rt.launch(rate_flows.two_customers, {})
    engine = await rt.engine(only=[record.id])
    await engine.start()
    reasons: set[str] = set()

    async def watch() -> None:
        while True:
            current = await outcome(rt, record.id)
            reasons.update(n.reason for n in current.nodes.values() if n.task_phase == 2)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(engine.wait(record.id), 60)
    watcher.cancel()
    await engine.stop()
    done = await outcome(rt, record.id)
    assert done.record.phase is ExecutionPhase.SUCCEEDED
    times = admissions(done.events)
    assert {k: len(v) for k, v in times.items()} == {"api/acme": 4, "api/globex": 2}
    for key, at in times.items():  # 2/s: one every 0.5 s of the store's clock, per key
        assert most_in_a_window(at, 1.0) <= 2, (key, at)
    # keys are independent: globex did not queue behind acme
    assert min(times["api/globex"]) < max(times["api/acme"])
    waits = [r for r in reasons if r.startswith("rate-limited on api/acme: next slot in")]
    assert waits, reasons
    assert any(r.endswith("position 3") for r in waits), waits


async def test_a_cache_hit_takes_no_slot(one_per_hour: Runtime, rate_flows: ModuleType) -> None:
    first = await run(one_per_hour, rate_flows.cached, n=2)
    assert first.record.phase is ExecutionPhase.SUCCEEDED
    second = await asyncio.wait_for(run(one_per_hour, rate_flows.cached, n=2), 30)
    assert second.record.phase is ExecutionPhase.SUCCEEDED  # within the hour: a hit
    assert len(admissions(first.events)["api"]) == 1
    assert admissions(second.events) == {}
    [limit] = await one_per_hour.rate_limits.describe("api")
    assert [(k.key, k.waiters) for k in limit.keys] == [("", ())]


async def test_a_failed_attempt_spends_its_slot(
    two_per_second: Runtime, rate_flows: ModuleType, tmp_path: Path
) -> None:
    done = await run(two_per_second, rate_flows.flaky, marker=str(tmp_path / "failed"))
    assert done.record.phase is ExecutionPhase.SUCCEEDED
    [attempts] = [admissions(done.events)["api"]]
    assert len(attempts) == 2  # the retry took a slot of its own
    assert attempts[1] - attempts[0] >= 0.5 - 1e-6


async def test_a_limit_nobody_set_fails_the_task_naming_it(
    two_per_second: Runtime, rate_flows: ModuleType
) -> None:
    done = await run(two_per_second, rate_flows.unknown_limit)
    assert done.record.phase is ExecutionPhase.FAILED
    [node] = done.nodes.values()
    assert node.phase is NodePhase.FAILED
    assert "no rate limit 'nowhere' is set" in (node.error or {}).get("message", "")
