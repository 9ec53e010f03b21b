"""The http_job plugin against a real job service on 127.0.0.1, on a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.plugins.webapi.fakes import FakeQuota, eventually, load_entry, same, settle, task_context
from tests.support.jobservice import JobService

from sluice.clock import FakeClock
from sluice.plugins.builtin.http_job import ENTRY as HTTP_JOB
from sluice.plugins.core.phase import ErrorKind, Phase, PhaseInfo
from sluice.plugins.testing import DictSecrets, FakeTaskContext, drive, setup_context
from sluice.plugins.webapi import AsyncPluginAdapter

RESYNC = 30.0
STATES = {
    "queued": "QUEUED",
    "running": "RUNNING",
    "succeeded": "SUCCESS",
    "failed": "PERMANENT_FAILURE",
    "cancelled": "PERMANENT_FAILURE",
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[JobService]:
    async with JobService(clock) as running:
        yield running


async def load(clock: FakeClock, config: dict[str, Any] | None = None) -> AsyncPluginAdapter:
    setup, _ = setup_context("http_job", config, clock)
    plugin = await load_entry(HTTP_JOB, setup)
    assert isinstance(plugin, AsyncPluginAdapter)
    return plugin


@pytest.fixture
async def plugin(clock: FakeClock) -> AsyncIterator[AsyncPluginAdapter]:
    loaded = await load(clock)
    yield loaded
    await loaded.close()


def job_config(service: JobService, **changes: Any) -> dict[str, Any]:
    config = {
        "create": {"url": f"{service.url}/jobs", "body": "{spec}"},
        "status_url": f"{service.url}/jobs/{{job_id}}",
        "states": STATES,
        "outputs": {"result": "result"},
    }
    return config | changes


def job(
    service: JobService,
    name: str = "a",
    clock: FakeClock | None = None,
    quota: Any = None,
    **spec: Any,
) -> FakeTaskContext:
    spec.setdefault("result", "ok")
    return task_context(
        name,
        custom=job_config(service),
        inputs={"spec": spec},
        clock=clock,
        quota=quota,
        task_type="http_job",
    )


async def step(plugin: AsyncPluginAdapter, ctx: FakeTaskContext) -> PhaseInfo:
    return (await plugin.handle(ctx)).info


async def poll(plugin: AsyncPluginAdapter, ctx: FakeTaskContext, clock: FakeClock) -> PhaseInfo:
    """One resync pass that brings news of the task, then handle the task."""
    seen = ctx.refreshes
    await settle()  # the resync loop is asleep on the clock before the clock moves
    clock.advance(RESYNC)
    await eventually(lambda: ctx.refreshes > seen, "news from a poll")
    return await step(plugin, ctx)


async def resync(plugin: AsyncPluginAdapter, clock: FakeClock, service: JobService) -> None:
    """One resync pass that polls (at least once) without news."""
    before = service.requests["get"]
    await settle()
    clock.advance(RESYNC)
    await eventually(lambda: service.requests["get"] > before, "a poll")
    await eventually(lambda: plugin.cache.polling == 0, "the answer to reach the cache")


async def quiet_resync(clock: FakeClock) -> None:
    """One resync pass during which no poll is expected."""
    await settle()
    clock.advance(RESYNC)
    await asyncio.sleep(0.02)


async def test_a_job_goes_queued_running_succeeded_with_outputs(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, queued_for=40, duration=30, result={"sum": 3})
    assert (await step(plugin, ctx)).phase is Phase.QUEUED
    queued = await poll(plugin, ctx, clock)
    assert (queued.phase, queued.reason) == (Phase.QUEUED, "job job-1 is queued")
    assert queued.info is not None
    assert queued.info.external_id == "job-1"
    assert (await poll(plugin, ctx, clock)).phase is Phase.RUNNING
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS
    assert ctx.written_outputs == {"result": {"sum": 3}}
    assert service.created == 1
    assert service.jobs["job-1"].spec == {"queued_for": 40, "duration": 30, "result": {"sum": 3}}


async def test_templates_fill_urls_and_body_from_inputs(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    custom = job_config(
        service,
        create={
            "url": f"{service.url}/jobs",
            "body": {"duration": "{seconds}", "result": "{a}/{b}"},
        },
    )
    ctx = task_context(
        "a", custom=custom, inputs={"seconds": 5, "a": "x", "b": 2}, task_type="http_job"
    )
    await step(plugin, ctx)
    assert service.jobs["job-1"].spec == {"duration": 5, "result": "x/2"}
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS
    assert ctx.written_outputs == {"result": "x/2"}


async def test_a_failed_job_is_a_permanent_failure_with_its_message(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, behavior="fail", duration=1, message="out of memory")
    await step(plugin, ctx)
    info = await poll(plugin, ctx, clock)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "RemoteJobFailed"
    assert info.reason == "job job-1 is failed: out of memory"
    assert ctx.written_outputs is None


async def test_a_state_not_in_the_mapping_fails_naming_it(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, queued_for=100)
    narrow = job_config(service, states={"succeeded": "SUCCESS", "running": "RUNNING"})
    ctx.task = ctx.task.model_copy(update={"custom": narrow})
    await step(plugin, ctx)
    info = await poll(plugin, ctx, clock)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert "in state 'queued', which is not in states ['running', 'succeeded']" in info.reason


async def test_429_on_create_waits_for_retry_after_and_creates_once(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, throttle_creates=2, retry_after=7, duration=1)
    first = await step(plugin, ctx)
    assert first.phase is Phase.WAITING_FOR_RESOURCES
    assert first.reason == f"HTTP 429 from POST {service.url}/jobs; create retried in 7s"
    assert same(await step(plugin, ctx), first)  # too early: nothing is sent
    assert service.requests["create"] == 1
    clock.advance(7)
    await eventually(lambda: ctx.refreshes == 1, "the refresh at the retry time")
    assert (await step(plugin, ctx)).phase is Phase.WAITING_FOR_RESOURCES
    clock.advance(7)
    await eventually(lambda: ctx.refreshes == 2, "the second refresh")
    assert (await step(plugin, ctx)).phase is Phase.QUEUED
    assert (service.requests["create"], service.created) == (3, 1)
    assert list(service.creates_by_key) == [ctx.metadata.generated_name()]
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS


async def test_500_on_create_is_a_retryable_system_failure(
    plugin: AsyncPluginAdapter, service: JobService
) -> None:
    info = await step(plugin, job(service, fail_creates=1))
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert "HTTP 500" in info.reason


async def test_a_rejected_create_is_a_permanent_failure(
    plugin: AsyncPluginAdapter, service: JobService
) -> None:
    ctx = job(service)
    ctx.task = ctx.task.model_copy(
        update={"custom": job_config(service, create={"url": f"{service.url}/nowhere", "body": {}})}
    )
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "CreateRejected"
    assert "HTTP 404" in info.reason


async def test_500_on_polls_is_transient(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, fail_gets=3, duration=1, result=1)
    await step(plugin, ctx)
    for _ in range(3):
        await resync(plugin, clock, service)
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS
    assert service.requests["get_500"] == 3


async def test_too_many_500s_fail_the_task_and_abort_cancels_the_job(
    service: JobService, clock: FakeClock
) -> None:
    plugin = await load(clock, {"caching": {"max_system_failures": 1}})
    ctx = job(service, fail_gets=100, behavior="hang")
    await step(plugin, ctx)
    await resync(plugin, clock, service)
    info = await poll(plugin, ctx, clock)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.cleanup_on_failure
    assert service.requests["get"] == 2
    await plugin.abort(ctx)  # what the engine does for a failure that asks for clean-up
    assert service.requests["delete"] == 1
    assert service.jobs["job-1"].cancelled_at is not None
    await plugin.close()


async def test_a_vanished_job_is_a_retryable_system_failure(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, behavior="vanish", duration=10)
    await step(plugin, ctx)
    info = await poll(plugin, ctx, clock)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert info.reason.startswith("job vanished: GET")
    assert "HTTP 404" in info.reason
    await plugin.abort(ctx)  # a DELETE of a job that is gone is fine


async def test_a_hanging_job_is_polled_until_aborted_then_cancelled_and_forgotten(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, behavior="hang")
    await step(plugin, ctx)
    assert (await poll(plugin, ctx, clock)).phase is Phase.RUNNING
    for _ in range(3):
        await resync(plugin, clock, service)
    await plugin.abort(ctx)  # the engine's task timeout
    await plugin.finalize(ctx)
    assert service.requests["delete"] == 1
    assert service.jobs["job-1"].cancelled_at is not None
    polls = service.requests["get"]
    for _ in range(3):
        await quiet_resync(clock)
    assert service.requests["get"] == polls == 4


async def test_429_on_polls_is_respected_and_not_a_failure(
    service: JobService, clock: FakeClock
) -> None:
    plugin = await load(clock, {"caching": {"max_system_failures": 0}})
    ctx = job(service, throttle_gets=1, retry_after=100, duration=1)
    await step(plugin, ctx)
    await resync(plugin, clock, service)
    assert service.requests["get_429"] == 1
    for _ in range(3):
        await quiet_resync(clock)
    assert service.requests["get"] == 1  # paused for Retry-After: 100 s from the 429
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS
    await plugin.close()


async def test_a_restarted_engine_does_not_post_again(
    service: JobService, clock: FakeClock
) -> None:
    before = await load(clock)
    ctx = job(service, duration=100)
    await step(before, ctx)
    await before.close()
    after = await load(clock)
    assert (await step(after, ctx)).phase is Phase.QUEUED
    clock.advance(100)
    assert (await poll(after, ctx, clock)).phase is Phase.SUCCESS
    assert (service.requests["create"], service.created) == (1, 1)
    await after.close()


async def test_a_create_repeated_after_a_lost_state_reuses_the_job(
    plugin: AsyncPluginAdapter, service: JobService
) -> None:
    ctx = job(service, duration=1)
    await step(plugin, ctx)
    ctx.state_writer.reset()  # as if the engine died between the POST and saving the state
    await step(plugin, ctx)
    assert (service.requests["create"], service.created) == (2, 1)


async def test_a_create_answer_with_the_state_needs_no_poll(
    plugin: AsyncPluginAdapter, service: JobService
) -> None:
    ctx = job(service, state_on_create=True, result=9)
    assert (await step(plugin, ctx)).phase is Phase.SUCCESS
    assert ctx.written_outputs == {"result": 9}
    assert service.requests["get"] == 0


async def test_secrets_fill_headers_and_are_not_persisted(
    plugin: AsyncPluginAdapter, service: JobService, clock: FakeClock
) -> None:
    ctx = job(service, duration=1)
    ctx.task = ctx.task.model_copy(
        update={"custom": job_config(service, headers={"Authorization": "Bearer {secret:TOKEN}"})}
    )
    ctx.secrets = DictSecrets({"TOKEN": "s3cr3t"})
    await step(plugin, ctx)
    assert (await poll(plugin, ctx, clock)).phase is Phase.SUCCESS
    assert service.authorizations == {"Bearer s3cr3t": 2}
    assert "s3cr3t" not in repr(ctx.state_reader.get())


async def test_a_missing_secret_is_a_permanent_failure(
    plugin: AsyncPluginAdapter, service: JobService
) -> None:
    ctx = job(service)
    ctx.task = ctx.task.model_copy(
        update={"custom": job_config(service, headers={"Authorization": "Bearer {secret:TOKEN}"})}
    )
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert "secret 'TOKEN' is not set" in info.reason
    assert service.requests["create"] == 0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"status_url": None}, "status_url: Input should be a valid string"),
        ({"states": {"done": "FINISHED"}}, "states.done: Input should be"),
        ({"states": {"running": "RUNNING"}}, "states: no remote state maps to SUCCESS"),
        ({"status_url": "http://h/jobs"}, "status_url: must contain {job_id}"),
        ({"cancel_url": "ftp://h/{job_id}"}, "cancel_url: must start with http:// or https://"),
        ({"stauts_url": "x"}, "stauts_url: Extra inputs are not permitted"),
        ({"quota": {"namespace_scope": 0}}, "quota.namespace_scope: Input should be greater"),
        ({"headers": {"X": "{spec}"}}, "headers.X: only {secret:NAME} placeholders"),
        ({"create": {"url": "http://h/{missing}"}}, "uses {missing}, which is not a task input"),
        ({"create": {"url": "http://h/{job_id}"}}, "create: {job_id} is only known after"),
    ],
)
async def test_a_bad_task_config_fails_permanently_naming_the_field(
    plugin: AsyncPluginAdapter, service: JobService, change: dict[str, Any], named: str
) -> None:
    ctx = job(service)
    ctx.task = ctx.task.model_copy(update={"custom": job_config(service) | change})
    info = await step(plugin, ctx)
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "BadTaskConfig"
    assert named in info.reason
    assert service.requests["create"] == 0


async def test_missing_config_fields_are_named(plugin: AsyncPluginAdapter) -> None:
    ctx = task_context("a", custom={"states": STATES}, task_type="http_job")
    info = await step(plugin, ctx)
    assert info.reason == "http_job config: create: Field required"


async def test_a_quota_bounds_the_jobs_in_flight(service: JobService, clock: FakeClock) -> None:
    plugin = await load(clock, {"resource_quotas": {"default": 3}})
    quota = FakeQuota({"default": 3})
    contexts = [job(service, f"t{n}", quota=quota, duration=10, result=n) for n in range(10)]

    async def drive(ctx: FakeTaskContext) -> PhaseInfo:
        while True:
            ctx.refreshed.clear()
            info = await step(plugin, ctx)
            if info.phase.is_terminal():
                await plugin.finalize(ctx)
                return info
            if info.phase is Phase.WAITING_FOR_RESOURCES:
                assert "/3 in use" in info.reason
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ctx.refreshed.wait(), 0.005)

    drivers = asyncio.gather(*(drive(ctx) for ctx in contexts))
    while not drivers.done():
        clock.advance(RESYNC)
        await asyncio.sleep(0.005)
    results = await drivers
    assert all(info.phase is Phase.SUCCESS for info in results)
    assert [ctx.written_outputs for ctx in contexts] == [{"result": n} for n in range(10)]
    assert service.created == 10
    assert service.max_in_flight == 3  # never more than the quota, and the quota was used
    assert quota.max_held == 3
    await plugin.close()


async def test_the_testing_driver_runs_an_http_job_to_success(
    service: JobService, clock: FakeClock
) -> None:
    plugin = await load(clock)
    ctx = job(service, queued_for=10, duration=10, result=5)

    async def ticker() -> None:
        while True:
            clock.advance(RESYNC)
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(ticker())
    try:
        seen = await drive(plugin, ctx)
    finally:
        ticking.cancel()
    assert seen[0].phase is Phase.QUEUED
    assert seen[-1].phase is Phase.SUCCESS
    assert ctx.written_outputs == {"result": 5}
    assert (service.created, service.requests["delete"]) == (1, 0)
    await plugin.close()
