"""The background poller: failures, vanished jobs, the read limiter, refreshes and eviction."""

from __future__ import annotations

from tests.plugins.webapi.fakes import (
    RESYNC,
    ScriptedRemote,
    load,
    metric,
    settle,
    step,
    task_context,
    tick_until,
)

from sluice.clock import FakeClock
from sluice.plugins.core.phase import ErrorKind, Phase
from sluice.plugins.webapi import ResourceVanishedError, RetryLater


async def test_more_than_max_system_failures_in_a_row_fail_the_task_with_cleanup() -> None:
    clock = FakeClock()
    remote = ScriptedRemote(get_error=lambda: RuntimeError("HTTP 500"))
    plugin = await load(remote, clock, {"caching": {"max_system_failures": 2}})
    ctx = task_context("a", clock=clock)
    await step(plugin, ctx)
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "the failure")
    info = await step(plugin, ctx)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert info.error.code == "CacheFailed"
    assert "3 consecutive polls failed, last: RuntimeError: HTTP 500" in info.reason
    assert info.cleanup_on_failure  # the job may still run: the engine aborts (deletes) it
    assert remote.gets == 3  # two failures tolerated, the third fails the task
    clock.advance(RESYNC * 3)
    await settle()
    assert remote.gets == 3  # and it is not polled any more
    assert metric(plugin, "call_failures_total", operation="get") == 3
    await plugin.close()


async def test_failures_must_be_consecutive() -> None:
    clock = FakeClock()
    script = iter(
        [RuntimeError("1"), RuntimeError("2"), None, RuntimeError("3"), RuntimeError("4"), None]
    )
    remote = ScriptedRemote(get_error=lambda: next(script, None))
    plugin = await load(remote, clock, {"caching": {"max_system_failures": 2}})
    ctx = task_context("a", clock=clock)
    await step(plugin, ctx)
    await tick_until(clock, RESYNC, lambda: remote.gets >= 6, "six polls")
    assert (await step(plugin, ctx)).phase is Phase.RUNNING
    await plugin.close()


async def test_the_failure_count_survives_a_restart() -> None:
    clock = FakeClock()
    remote = ScriptedRemote(get_error=lambda: RuntimeError("down"))
    before = await load(remote, clock, {"caching": {"max_system_failures": 2}})
    ctx = task_context("a", clock=clock)
    await step(before, ctx)
    await tick_until(clock, RESYNC, lambda: remote.gets >= 2, "two failed polls")
    await step(before, ctx)  # persists sync_failure_count = 2
    await before.close()
    after = await load(remote, clock, {"caching": {"max_system_failures": 2}})
    await step(after, ctx)
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "the failure")
    assert (await step(after, ctx)).phase is Phase.RETRYABLE_FAILURE
    assert remote.gets == 3
    await after.close()


async def test_a_vanished_job_is_a_retryable_system_failure() -> None:
    clock = FakeClock()
    remote = ScriptedRemote(get_error=lambda: ResourceVanishedError("GET /jobs/1: HTTP 404"))
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    await step(plugin, ctx)
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "the vanished job")
    info = await step(plugin, ctx)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert info.error.code == "ResourceDeletedExternally"
    assert info.reason.startswith("job vanished")
    assert remote.gets == 1
    await plugin.close()


async def test_a_throttled_poll_is_not_a_failure_and_pauses_polling() -> None:
    clock = FakeClock()
    throttles = iter([RetryLater(100.0, "HTTP 429")] * 3)
    remote = ScriptedRemote(get_error=lambda: next(throttles, None))
    plugin = await load(remote, clock, {"caching": {"max_system_failures": 0}})
    ctx = task_context("a", clock=clock)
    await step(plugin, ctx)
    await tick_until(clock, RESYNC, lambda: remote.gets >= 1, "the throttled poll")
    clock.advance(RESYNC * 3)  # resync passes within the Retry-After: no poll goes out
    await settle()
    assert remote.gets == 1
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "a successful poll")
    assert (await step(plugin, ctx)).phase is Phase.RUNNING
    assert remote.gets == 4
    await plugin.close()


async def test_polls_obey_the_read_limiter() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock, {"read_rate_limiter": {"qps": 1, "burst": 5}})
    for n in range(12):
        await step(plugin, task_context(f"t{n}", clock=clock))
    await tick_until(clock, RESYNC, lambda: remote.gets >= 5, "the burst of polls")
    await settle()
    assert remote.gets == 5
    clock.advance(1.0)
    await settle()
    assert remote.gets == 6
    clock.advance(2.0)
    await settle()
    assert remote.gets == 8
    await plugin.close()


async def test_refresh_is_asked_only_when_the_resource_changes() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    await step(plugin, ctx)
    await tick_until(clock, RESYNC, lambda: remote.gets >= 1, "the first poll")
    await tick_until(clock, RESYNC, lambda: remote.gets >= 3, "two more polls")
    assert ctx.refreshes == 1  # the first answer is news; the same answer again is not
    remote.jobs["job-1"]["state"] = "still running, differently"
    await tick_until(clock, RESYNC, lambda: ctx.refreshes == 2, "a refresh on change")
    await plugin.close()


async def test_an_evicted_item_is_seeded_again_from_the_persisted_state() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock, {"caching": {"size": 10}})
    contexts = [task_context(f"t{n}", clock=clock) for n in range(12)]
    for ctx in contexts:
        await step(plugin, ctx)
    assert len(plugin.cache) == 10
    assert contexts[0].metadata.generated_name() not in plugin.cache
    assert (await step(plugin, contexts[0])).phase is Phase.QUEUED
    assert contexts[0].metadata.generated_name() in plugin.cache
    assert remote.created == 12
    await plugin.close()
