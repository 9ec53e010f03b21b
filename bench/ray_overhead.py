"""Round trip of one Ray task through sluice against the same function on the same cluster,
in alternating rounds: (a) a sluice workflow of one `type="ray"` task, launched and driven
to SUCCEEDED by an engine in this process (a Ray job: a driver process on the cluster);
(b) a bare Ray job of the same kind (`python -c pass`, submitted and polled every 0.1 s);
(c) a bare `ray.get` of the function as a Ray task (a warm worker, no job).

With --fanout N, then a workflow of N such tasks through one engine, at most --at-once of
them on the cluster at a time (a quota on `ray:bench`): its wall time, tasks/s, the number of
jobs the cluster saw for it (N: one submission each), each task's time in its slot
(wall time x at-once / N) over a bare `ray.get`, and a bare fan-out of N `ray.get`s.
--quick: 2 rounds and a fan-out of 20.

--mode task (or both, the default): the fan-out of N through one engine in the plugin's task
mode (`RayJobConfig(mode="task")`: Ray tasks owned by the task host actor, no job each), no
quota, alternating with a bare fan-out of N `ray.get`s, --rounds times: medians, tasks/s and
the per-task overhead ((sluice - bare) / N). --mode job skips it; --mode task skips the rest.

Prints one JSON line: median seconds of each and the differences. Starts a local 2-CPU Ray
cluster on 127.0.0.1 unless --address names a dashboard (then --gcs names its GCS address).

    python bench/ray_overhead.py [--rounds 5] [--fanout 200 --at-once 4] [--quick]
                                 [--mode job|task|both]
                                 [--address http://127.0.0.1:8265 --gcs 127.0.0.1:6379]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sluice
from sluice.config import load_config
from sluice.plugins.ray import RayJobConfig


@sluice.task(type="ray", custom=RayJobConfig(poll_interval=0.1), name="bench.add_one")
def add_one(x: int) -> int:
    return x + 1


@sluice.task(
    type="ray",
    custom=RayJobConfig(poll_interval=0.5),
    name="bench.add_one_bounded",
    quotas=[sluice.Quota("ray:bench")],
)
def add_one_bounded(x: int) -> int:
    return x + 1


@sluice.task(type="ray", custom=RayJobConfig(mode="task"), name="bench.add_one_task")
def add_one_task(x: int) -> int:
    return x + 1


def task_fanout(n: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.ray_task_fanout{n}")
    def wf() -> None:
        for i in range(n):
            add_one_task(x=i)

    return wf


def fanout(n: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.ray_fanout{n}")
    def wf() -> None:
        for i in range(n):
            add_one_bounded(x=i)

    return wf


@sluice.workflow(name="bench.one_ray_task")
def one_ray_task(x: int = 1) -> int:
    return add_one(x=x)


async def sluice_round(runtime: Any) -> float:
    started = time.perf_counter()
    record = await runtime.launch(one_ray_task, {})
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    try:
        await engine.wait(record.id)
    finally:
        await engine.stop()
    elapsed = time.perf_counter() - started
    async with runtime.store.read() as repos:
        final = await repos.executions.get(record.id)
    assert final is not None and final.outputs == {"o0": 2}, final
    return elapsed


def bare_job_round(client: Any) -> float:
    started = time.perf_counter()
    job = client.submit_job(entrypoint=f"{sys.executable} -c pass")
    while str(client.get_job_status(job)) not in ("SUCCEEDED", "JobStatus.SUCCEEDED"):
        time.sleep(0.1)
    return time.perf_counter() - started


def bare_get_round(remote: Any) -> float:
    import ray

    started = time.perf_counter()
    assert ray.get(remote.remote(1)) == 2
    return time.perf_counter() - started


def bare_fanout(remote: Any, n: int) -> float:
    import ray

    started = time.perf_counter()
    assert ray.get([remote.remote(i) for i in range(n)]) == [i + 1 for i in range(n)]
    return time.perf_counter() - started


async def fanout_round(
    runtime: Any, client: Any, remote: Any, n: int, at_once: int
) -> dict[str, Any]:
    started = time.perf_counter()
    record = await runtime.launch(fanout(n), {})
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    try:
        await engine.wait(record.id)
    finally:
        await engine.stop()
    elapsed = time.perf_counter() - started
    async with runtime.store.read() as repos:
        final = await repos.executions.get(record.id)
    assert final is not None and final.phase.value == "SUCCEEDED", final
    mine = [(j.metadata or {}).get("sluice_execution") == record.id for j in client.list_jobs()]
    bare = bare_fanout(remote, n)
    return {
        "fanout_tasks": n,
        "fanout_at_once": at_once,
        "fanout_s": round(elapsed, 1),
        "fanout_tasks_per_s": round(n / elapsed, 2),
        "fanout_task_in_slot_s": round(elapsed * at_once / n, 3),
        "fanout_jobs_seen": sum(mine),
        "bare_fanout_s": round(bare, 3),
        "bare_fanout_tasks_per_s": round(n / bare, 1),
    }


async def task_fanout_round(runtime: Any, n: int) -> float:
    started = time.perf_counter()
    record = await runtime.launch(task_fanout(n), {})
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    try:
        await engine.wait(record.id)
    finally:
        await engine.stop()
    elapsed = time.perf_counter() - started
    async with runtime.store.read() as repos:
        final = await repos.executions.get(record.id)
    assert final is not None and final.phase.value == "SUCCEEDED", final
    return elapsed


async def task_mode(runtime: Any, remote: Any, rounds: int, n: int) -> dict[str, Any]:
    """Alternating rounds of the task-mode fan-out and a bare one."""
    await task_fanout_round(runtime, min(n, 4))  # connect, create the task host, warm workers
    sluice_s: list[float] = []
    bare_s: list[float] = []
    for _ in range(rounds):
        sluice_s.append(await task_fanout_round(runtime, n))
        bare_s.append(bare_fanout(remote, n))
    sluice_m, bare_m = statistics.median(sluice_s), statistics.median(bare_s)
    return {
        "task_mode_fanout_tasks": n,
        "task_mode_rounds": rounds,
        "task_mode_fanout_s": round(sluice_m, 2),
        "task_mode_tasks_per_s": round(n / sluice_m, 1),
        "task_mode_bare_fanout_s": round(bare_m, 3),
        "task_mode_bare_tasks_per_s": round(n / bare_m, 1),
        "task_mode_overhead_per_task_ms": round(1000 * (sluice_m - bare_m) / n, 1),
    }


async def measure(
    address: str,
    gcs: str,
    rounds: int,
    fan: int = 0,
    at_once: int = 4,
    mode: str = "both",
) -> dict[str, Any]:
    import ray
    from ray.job_submission import JobSubmissionClient

    from sluice.runtime import Runtime

    ray.init(address=gcs, logging_level="ERROR")
    remote = ray.remote(add_one.fn)
    client = JobSubmissionClient(address)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_config(
            database_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
            plugins={"config": {"ray": {"address": address, "gcs_address": gcs}}},
            resources={"quotas": {"ray:bench": at_once}},
        )
        runtime = await Runtime.open(settings)
        times: dict[str, list[float]] = {"sluice": [], "bare_job": [], "bare_get": []}
        try:
            bare_get_round(remote)  # warm a worker for the function
            for _ in range(rounds if mode != "task" else 0):
                times["sluice"].append(await sluice_round(runtime))
                times["bare_job"].append(bare_job_round(client))
                times["bare_get"].append(bare_get_round(remote))
            extra = {}
            if fan and mode != "task":
                extra = await fanout_round(runtime, client, remote, fan, at_once)
            if fan and mode != "job":
                extra |= await task_mode(runtime, remote, rounds, fan)
        finally:
            await runtime.close()
            ray.shutdown()
    figures = (summary(times, rounds) if mode != "task" else {}) | extra
    if "fanout_task_in_slot_s" in extra:
        over = extra["fanout_task_in_slot_s"] - figures["bare_ray_get_ms"] / 1000
        figures["fanout_task_over_bare_get_s"] = round(over, 3)
    return figures


def summary(times: dict[str, list[float]], rounds: int) -> dict[str, Any]:
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "rounds": rounds,
        "sluice_ray_task_s": round(median["sluice"], 3),
        "bare_ray_job_s": round(median["bare_job"], 3),
        "bare_ray_get_ms": round(1000 * median["bare_get"], 2),
        "sluice_over_bare_job_s": round(median["sluice"] - median["bare_job"], 3),
        "sluice_over_bare_get_s": round(median["sluice"] - median["bare_get"], 3),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fanout", type=int, default=0, help="then N tasks in one workflow")
    parser.add_argument("--at-once", type=int, default=4, help="jobs on the cluster at a time")
    parser.add_argument("--address", help="a cluster's dashboard URL (default: start one)")
    parser.add_argument("--gcs", help="that cluster's GCS address, host:port")
    parser.add_argument("--mode", choices=("job", "task", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="2 rounds, a fan-out of 20")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.fanout = 2, args.fanout or 20
    if args.address:
        out = asyncio.run(
            measure(args.address, args.gcs, args.rounds, args.fanout, args.at_once, args.mode)
        )
    else:
        from sluice.plugins.ray.cluster import LOOPBACK_ENV, LocalRayCluster

        os.environ.update(LOOPBACK_ENV)  # this process's ray.init stays on loopback too
        cluster = LocalRayCluster(head_cpus=2)
        cluster.launch()
        try:
            asyncio.run(cluster.wait_ready(180))
            out = asyncio.run(
                measure(
                    cluster.address,
                    cluster.gcs_address,
                    args.rounds,
                    args.fanout,
                    args.at_once,
                    args.mode,
                )
            )
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
