"""The async adapter's state machine, against a scripted in-memory remote and a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.plugins.webapi.fakes import (
    RESYNC,
    FakeQuota,
    ScriptedRemote,
    load,
    metric,
    same,
    settle,
    step,
    task_context,
    tick_until,
)

from sluice.clock import FakeClock
from sluice.plugins.core.phase import ErrorKind, Phase
from sluice.plugins.webapi import RetryLater
from sluice.plugins.webapi.state import WebApiPhase
from sluice.resources.models import AllocationStatus


async def test_creates_once_polls_in_the_background_and_succeeds() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    first = await step(plugin, ctx)
    assert (first.phase, first.reason) == (Phase.QUEUED, "job created")
    assert same(await step(plugin, ctx), first)  # not polled yet: same phase and version
    remote.jobs["job-1"].update(state="done", out=42)
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "a refresh after the poll")
    done = await step(plugin, ctx)
    assert done.phase is Phase.SUCCESS
    assert ctx.written_outputs == {"out": 42}
    assert (remote.created, remote.gets) == (1, 1)
    assert metric(plugin, "calls_total", operation="create") == 1
    assert metric(plugin, "calls_total", operation="get") == 1
    await plugin.close()


async def test_a_restarted_engine_resumes_polling_without_creating_again() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    before = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    await step(before, ctx)
    await before.close()
    after = await load(remote, clock)  # a fresh adapter; the task's persisted state survives
    assert (await step(after, ctx)).phase is Phase.QUEUED
    remote.jobs["job-1"]["state"] = "done"
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "the resumed poll")
    assert (await step(after, ctx)).phase is Phase.SUCCESS
    assert remote.created == 1
    await after.close()


async def test_a_refused_token_waits_with_the_managers_reason() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    quota = FakeQuota({"default": 1})
    plugin = await load(remote, clock, {"resource_quotas": {"default": 1}})
    holder, waiter = (task_context(n, quota=quota, clock=clock) for n in ("a", "b"))
    assert (await step(plugin, holder)).phase is Phase.QUEUED
    waiting = await step(plugin, waiter)
    assert waiting.phase is Phase.WAITING_FOR_RESOURCES
    assert waiting.reason == "waiting for default: 1/1 in use, position 1"
    assert same(await step(plugin, waiter), waiting)  # same reason: same version, no new event
    quota.quotas["default"] = 2
    quota.holders["default"].add("someone-else")
    changed = await step(plugin, waiter)
    assert changed.reason == "waiting for default: 2/2 in use, position 1"
    assert changed.version == waiting.version + 1
    assert remote.created == 1
    await plugin.finalize(holder)
    assert (await step(plugin, waiter)).phase is Phase.QUEUED
    assert remote.created == 2
    await plugin.close()


async def test_namespace_quota_exceeded_is_waiting_not_an_error() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    quota = FakeQuota({"default": 5}, force=AllocationStatus.NAMESPACE_QUOTA_EXCEEDED)
    plugin = await load(remote, clock, {"resource_quotas": {"default": 5}})
    ctx = task_context("a", quota=quota, clock=clock)
    info = await step(plugin, ctx)
    assert info.phase is Phase.WAITING_FOR_RESOURCES
    assert "0/5 in use" in info.reason
    assert metric(plugin, "allocation_grant_failed_total", status="namespace_quota_exceeded") == 1
    quota.force = None
    assert (await step(plugin, ctx)).phase is Phase.QUEUED
    await plugin.close()


async def test_resource_wait_time_is_zero_on_a_first_try_grant_and_real_after_a_wait() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    quota = FakeQuota({"default": 1})
    plugin = await load(remote, clock, {"resource_quotas": {"default": 1}})
    first, second = (task_context(n, quota=quota, clock=clock) for n in ("a", "b"))
    await step(plugin, first)
    assert metric(plugin, "resource_wait_time_seconds_sum") == 0.0
    assert metric(plugin, "resource_wait_time_seconds_count") == 1
    await step(plugin, second)
    clock.advance(7.0)
    await plugin.finalize(first)
    await step(plugin, second)
    assert metric(plugin, "resource_wait_time_seconds_sum") == 7.0
    assert metric(plugin, "allocation_grant_success_total") == 2
    await plugin.close()


async def test_a_failed_create_is_a_retryable_failure_and_keeps_the_token_until_finalize() -> None:
    clock, remote = FakeClock(), ScriptedRemote(create_error=ConnectionError("refused"))
    quota = FakeQuota({"default": 1})
    plugin = await load(remote, clock, {"resource_quotas": {"default": 1}})
    ctx = task_context("a", quota=quota, clock=clock)
    info = await step(plugin, ctx)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert "refused" in info.error.message
    assert quota.holders["default"] == {ctx.metadata.generated_name()}
    assert same(await step(plugin, ctx), info)  # terminal: reported again, nothing called
    await plugin.finalize(ctx)
    await plugin.finalize(ctx)  # idempotent
    assert quota.holders["default"] == set()
    assert metric(plugin, "resource_release_success_total") == 2
    assert metric(plugin, "call_failures_total", operation="create") == 1
    await plugin.close()


async def test_a_throttled_create_waits_and_is_sent_again_after_the_delay() -> None:
    clock = FakeClock()
    remote = ScriptedRemote(create_error=RetryLater(10.0, "HTTP 429 from POST /jobs"))
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    info = await step(plugin, ctx)
    assert info.phase is Phase.WAITING_FOR_RESOURCES
    assert info.reason == "HTTP 429 from POST /jobs; create retried in 10s"
    remote.create_error = None
    clock.advance(5.0)
    assert same(await step(plugin, ctx), info)
    assert remote.created == 0
    clock.advance(5.0)
    await settle()
    assert ctx.refreshes == 1  # the engine is asked to come back when the delay is over
    assert (await step(plugin, ctx)).phase is Phase.QUEUED
    assert remote.created == 1
    await plugin.close()


async def test_create_returning_the_resource_can_finish_without_a_poll() -> None:
    clock, remote = FakeClock(), ScriptedRemote(return_resource=True)
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    assert (await step(plugin, ctx)).phase is Phase.RUNNING  # the create answer said "running"
    remote.jobs["job-1"]["state"] = "failed"
    await tick_until(clock, RESYNC, lambda: ctx.refreshes > 0, "the poll")
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert ctx.state_reader.get()["phase"] == WebApiPhase.USER_FAILURE  # type: ignore[index]
    await plugin.close()


async def test_abort_deletes_the_job_and_stops_polling_it() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock)
    ctx, other = task_context("a", clock=clock), task_context("b", clock=clock)
    await step(plugin, ctx)
    await step(plugin, other)
    await plugin.abort(ctx)
    assert remote.deletes == ["job-1"]
    assert ctx.metadata.generated_name() not in plugin.cache
    await plugin.finalize(ctx)
    await tick_until(clock, RESYNC, lambda: remote.gets >= 1, "the other task's poll")
    clock.advance(RESYNC)
    await settle()
    assert remote.gets == 2  # only the task still running is polled
    await plugin.close()


async def test_abort_before_create_deletes_nothing() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    quota = FakeQuota({"default": 0})
    plugin = await load(remote, clock, {"resource_quotas": {"default": 1}})
    ctx = task_context("a", quota=quota, clock=clock)
    assert (await step(plugin, ctx)).phase is Phase.WAITING_FOR_RESOURCES
    await plugin.abort(ctx)
    await plugin.finalize(ctx)
    assert remote.deletes == []
    assert quota.waiters["default"] == []
    await plugin.close()


async def test_many_concurrent_creates_obey_the_write_limiter() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    plugin = await load(remote, clock, {"write_rate_limiter": {"qps": 1, "burst": 5}})
    contexts = [task_context(f"t{n}", clock=clock) for n in range(12)]
    handles = [asyncio.create_task(plugin.handle(ctx)) for ctx in contexts]
    await settle()
    assert remote.created == 5  # the burst; the others wait for tokens
    clock.advance(1.0)
    await settle()
    assert remote.created == 6
    clock.advance(3.0)
    await settle()
    assert remote.created == 9
    while not all(h.done() for h in handles):
        clock.advance(1.0)
        await settle()
    assert remote.created == 12
    await plugin.close()


async def test_an_unknown_quota_namespace_is_a_permanent_failure_naming_it() -> None:
    clock, remote = FakeClock(), ScriptedRemote(namespace="hive")
    plugin = await load(remote, clock, {"resource_quotas": {"default": 1}})
    ctx = task_context("a", quota=FakeQuota({"default": 1}), clock=clock)
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "UnknownQuotaNamespace"
    assert "'hive'" in info.reason
    assert remote.created == 0
    await plugin.close()


async def test_a_resource_meta_that_is_not_json_fails_without_creating_again() -> None:
    clock, remote = FakeClock(), ScriptedRemote()
    original = remote.create

    async def create(ctx: Any) -> Any:
        _, resource = await original(ctx)
        return {"job": object()}, resource

    remote.create = create  # type: ignore[method-assign]
    plugin = await load(remote, clock)
    ctx = task_context("a", clock=clock)
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "BadResourceMeta"
    assert same(await step(plugin, ctx), info)
    assert remote.created == 1
    await plugin.close()
