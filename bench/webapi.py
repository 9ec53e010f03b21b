"""Benchmark: many concurrent http_job tasks against the local job service, under one quota.

    .venv/bin/python bench/webapi.py [--tasks 1000] [--quota 50] [--read-qps 100] ...

Prints one JSON line: the most jobs in flight (must never pass the quota), the poll rate seen
by the service against the read limiter's bound (burst + qps * T for windows of T seconds),
and the wall time against the ideal (ceil(tasks / quota) job durations).

Each task's plugin is driven here directly, the way the engine's task handler drives it
(`handle` until terminal, waking on `refresh()`, then `finalize`), so that the figures are
the plugin's and the job service's, not the store's. The tasks share one fair in-memory quota
manager (FIFO waiters, a release wakes the next ones). Upstream's smallest resync interval is
5 s, so to finish in seconds the plugin, the job service and all figures run on one clock that
goes `--time-scale` times faster than real time; every figure is in that clock's seconds except
`real_wall_s`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.support

from tests.support.jobservice import ScaledClock  # noqa: E402

from sluice.plugins.builtin.http_job import ENTRY  # noqa: E402
from sluice.plugins.core.context import SetupContext, TaskExecutionMetadata  # noqa: E402
from sluice.plugins.core.phase import PhaseInfo  # noqa: E402
from sluice.plugins.core.plugin import Plugin  # noqa: E402
from sluice.plugins.testing import DictSecrets, FakeTaskContext  # noqa: E402
from sluice.plugins.webapi import AsyncPluginAdapter, RateLimiter  # noqa: E402
from sluice.resources import Holder, QuotaManager, from_url  # noqa: E402
from sluice.spec.models import TaskSpec  # noqa: E402


@asynccontextmanager
async def job_service(clock: ScaledClock) -> AsyncIterator[str]:
    """The job service in its own process (its CPU must not slow the plugin), on `clock`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.jobservice",
        "--time-scale",
        str(clock.scale),
        "--start",
        repr(clock.start),
        "--origin",
        repr(clock.origin),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        yield json.loads(await process.stdout.readline())["url"]
    finally:
        process.terminate()
        await process.wait()


class RecordingLimiter(RateLimiter):
    """The read limiter, noting when each poll is let through (the plugin's send times)."""

    def __init__(self, qps: float, burst: int, clock: ScaledClock) -> None:
        super().__init__(qps, burst, clock)
        self.times: list[float] = []
        self._now = clock.now

    async def acquire(self) -> None:
        await super().acquire()
        self.times.append(self._now())


def task_config(url: str, seconds: float) -> dict[str, Any]:
    return {
        "create": {"url": f"{url}/jobs", "body": {"duration": seconds, "result": "{n}"}},
        "status_url": f"{url}/jobs/{{job_id}}",
        "states": {
            "queued": "QUEUED",
            "running": "RUNNING",
            "succeeded": "SUCCESS",
            "failed": "PERMANENT_FAILURE",
        },
        "outputs": {"result": "result"},
    }


def make_task(
    n: int,
    custom: dict[str, Any],
    rm: QuotaManager,
    clock: ScaledClock,
    wakers: dict[str, Callable[[], None]],
) -> FakeTaskContext:
    spec = TaskSpec(name="bench", version="1", type="http_job", custom=custom)
    meta = TaskExecutionMetadata(
        execution_id=f"xbench{n:05d}",
        project="p",
        domain="d",
        node_id="n0",
        attempt=0,
        task_name="bench",
    )
    holder = Holder(meta.project, meta.domain, meta.execution_id, meta.node_id)
    proxy = rm.for_task("http_job", holder)
    ctx = FakeTaskContext(spec, {"n": n}, meta, resource_manager=proxy, clock=clock)
    wakers[proxy.qualify("default", meta.generated_name())[1]] = ctx.refresh  # type: ignore[attr-defined]
    return ctx


async def drive(plugin: Plugin, ctx: FakeTaskContext) -> PhaseInfo:
    """What the engine does for one task: handle until terminal, waking on refresh."""
    while True:
        ctx.refreshed.clear()
        info = (await plugin.handle(ctx)).info
        if info.phase.is_terminal():
            await plugin.finalize(ctx)
            return info
        with contextlib.suppress(TimeoutError):  # the engine's safety-net re-evaluation
            await asyncio.wait_for(ctx.refreshed.wait(), 2.0)


async def renew_leases(
    rm: QuotaManager, contexts: list[FakeTaskContext], clock: ScaledClock
) -> None:
    """What the engine does for every live task: renew the leases of the tokens its plugin
    holds, every third of a lease. Without it a long job's token lapses and is reclaimed."""
    while True:
        await clock.sleep(rm.lease / 3)
        for ctx in contexts:
            proxy = ctx.resource_manager
            for namespace, token in getattr(proxy, "allocations", ()):
                await rm.renew(token, [namespace])


def max_in_window(times: list[float], window: float) -> int:
    """The most events in any closed interval of `window` seconds (times sorted)."""
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] > window:
            start += 1
        most = max(most, end - start + 1)
    return most


def poll_figures(
    sent: list[float], received: list[float], qps: float, burst: int
) -> dict[str, Any]:
    """Polls as the plugin sent them (checked against the limiter's bound for windows of
    0.1 to 10 s) and as the service received them (network and scheduling delays can bunch
    arrivals, so this one is reported, not checked)."""
    ordered, arrived = sorted(sent), sorted(received)
    windows = (0.1, 1.0, 5.0, 10.0)
    most = {w: max_in_window(ordered, w) for w in windows}
    span = (ordered[-1] - ordered[0]) if len(ordered) > 1 else 0.0
    return {
        "polls": len(arrived),
        "max_polls_sent_in_1s": most[1.0],
        "max_polls_received_in_1s": max_in_window(arrived, 1.0),
        "poll_bound_1s": burst + qps,
        "mean_poll_rate": round(len(ordered) / span, 2) if span else 0.0,
        "poll_rate_within_limiter": all(most[w] <= burst + qps * w for w in windows),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = ScaledClock(args.time_scale)
    rm = QuotaManager(from_url("memory://"), clock=clock)  # the policy the engine uses
    wakers: dict[str, Callable[[], None]] = {}

    def wake(_namespace: str, ready: tuple[str, ...] | None) -> None:
        # As the engine does: wake the tasks the manager says may now be granted, or every
        # waiting task when nobody queues.
        chosen = wakers.values() if ready is None else [wakers[t] for t in ready if t in wakers]
        for wake_one in chosen:
            wake_one()

    rm.subscribe_ready(wake)
    section = {
        "resource_quotas": {"default": args.quota},
        "read_rate_limiter": {"qps": args.read_qps, "burst": args.read_burst},
        "caching": {"resync_interval": args.resync},
    }
    setup = SetupContext(
        "http_job", rm.registrar("http_job"), CollectorRegistry(), DictSecrets(), section, clock
    )
    loaded = ENTRY.load(setup)
    plugin = await loaded if inspect.isawaitable(loaded) else loaded
    assert isinstance(plugin, AsyncPluginAdapter)
    await rm.start()
    limiter = RecordingLimiter(args.read_qps, args.read_burst, clock)
    plugin.calls.read_limiter = limiter  # same bucket, and it notes each poll's send time
    async with job_service(clock) as url:
        tasks = [
            make_task(n, task_config(url, args.job_seconds), rm, clock, wakers)
            for n in range(args.tasks)
        ]
        started, real_start = clock.now(), time.monotonic()
        renewer = asyncio.create_task(renew_leases(rm, tasks, clock))
        results = await asyncio.gather(*(drive(plugin, ctx) for ctx in tasks))
        wall, real_wall = clock.now() - started, time.monotonic() - real_start
        renewer.cancel()
        async with httpx.AsyncClient() as client:
            stats = (await client.get(f"{url}/stats")).json()
    await plugin.close()
    await rm.close()
    stats["sent_times"] = limiter.times
    return report(args, results, stats, rm, wall, real_wall)


def report(
    args: argparse.Namespace,
    results: list[PhaseInfo],
    stats: dict[str, Any],
    rm: QuotaManager,
    wall: float,
    real_wall: float,
) -> dict[str, Any]:
    ideal = math.ceil(args.tasks / args.quota) * args.job_seconds
    return {
        "bench": "webapi",
        "tasks": args.tasks,
        "quota": args.quota,
        "succeeded": sum(info.phase.is_success() for info in results),
        "max_in_flight": stats["max_in_flight"],
        "in_flight_within_quota": stats["max_in_flight"] <= args.quota,
        "jobs_created": stats["created"],
        "create_requests": stats["requests"]["create"],
        "read_qps": args.read_qps,
        "read_burst": args.read_burst,
        **poll_figures(stats["sent_times"], stats["get_times"], args.read_qps, args.read_burst),
        "job_seconds": args.job_seconds,
        "resync_interval": args.resync,
        "time_scale": args.time_scale,
        "wall_s": round(wall, 1),
        "ideal_s": ideal,
        "wall_vs_ideal": round(wall / ideal, 2),
        "real_wall_s": round(real_wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--quota", type=int, default=50)
    parser.add_argument("--read-qps", type=float, default=100.0)
    parser.add_argument("--read-burst", type=int, default=10)
    parser.add_argument("--job-seconds", type=float, default=10.0)
    parser.add_argument("--resync", type=float, default=5.0, help="caching.resync_interval")
    parser.add_argument("--time-scale", type=float, default=10.0)
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
