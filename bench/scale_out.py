"""Engines that scale out: a backlog of short python tasks drained by 1, 2 and 3 `sluice engine`
processes on one PostgreSQL store, and the takeover of a SIGKILLed engine's executions.

The backlog is `--executions` executions of a workflow of `--tasks` no-op tasks each (default
300 x 10 = 3,000 tasks), launched before the engines start. An engine's `parallelism` bounds
both the executions it claims and the tasks it runs at once, so the backlog is many small
executions: engines share it by claiming executions as their own end. Each measurement runs
on a PostgreSQL database created for it and dropped after.

For each engine count, one JSON line: tasks/s from the engines' start to the last
execution's end (and from the moment every engine is up, as engines start one after the other
on a busy machine), and the CPU seconds each engine process used (the engine itself, and its
pool of task workers) and the store's server processes still connected to that database at
the end. Then, with 3 engines, one is SIGKILLed while it drives executions: one JSON line with
the time from the kill until every execution it held was claimed by a survivor, and until
they all succeeded.

    python bench/scale_out.py [--executions 300 --tasks 10] [--engines 1 2 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from overhead_tasks import noop

import sluice
from sluice.config import load_config

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def backlog_workflow(tasks: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.scale_out{tasks}")
    def wf() -> None:
        for i in range(tasks):
            noop(i=i)

    return wf


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A PostgreSQL database for one measurement, dropped after (with its connections)."""
    import psycopg

    name = f"sluice_scale_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def launch_backlog(url: str, executions: int, tasks: int) -> None:
    from sluice.runtime import Runtime

    runtime = await Runtime.open(load_config(database_url=url), upgrade=True)
    try:
        workflow = backlog_workflow(tasks)
        for _ in range(executions):
            await runtime.launch(workflow, {})
    finally:
        await runtime.close()


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, from /proc (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


@dataclass
class Engine:
    process: subprocess.Popen[str]
    engine_id: str = ""

    def cpu(self) -> dict[str, float]:
        workers = sum(cpu_seconds(child) for child in children(self.process.pid))
        return {
            "engine_cpu_s": round(cpu_seconds(self.process.pid), 2),
            "workers_cpu_s": round(workers, 2),
        }


def start_engines(url: str, count: int, workers: int, parallelism: int) -> list[Engine]:
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": url,
        "SLUICE_ENGINE__WORKERS": str(workers),
        "SLUICE_ENGINE__PARALLELISM": str(parallelism),
    }
    engines = [
        Engine(
            subprocess.Popen(
                [sys.executable, "-m", "sluice", "engine"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
        for _ in range(count)
    ]
    for engine in engines:
        assert engine.process.stdout is not None
        line = engine.process.stdout.readline()  # "engine <id> running on <url>"
        if not line.startswith("engine "):
            raise RuntimeError(f"an engine did not start (exit {engine.process.poll()})")
        engine.engine_id = line.split()[1]
    return engines


def stop_engines(engines: list[Engine]) -> None:
    for engine in engines:
        if engine.process.poll() is None:
            engine.process.send_signal(signal.SIGTERM)
    for engine in engines:
        try:
            engine.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            engine.process.kill()
            engine.process.wait()


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `check()` holds, polling every 50 ms."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.05)
    return time.perf_counter() - started


def unfinished(url: str) -> int:
    rows = query(url, "SELECT count(*) FROM executions WHERE phase <> 'SUCCEEDED'")
    return int(rows[0][0])


def tasks_done(url: str) -> int:
    rows = query(url, "SELECT count(*) FROM node_executions WHERE phase = 'SUCCEEDED'")
    return int(rows[0][0])


def store_cpu(url: str) -> float:
    """CPU of the PostgreSQL server processes serving this database (when on this host)."""
    name = url.rsplit("/", 1)[1]
    rows = query(url, "SELECT pid FROM pg_stat_activity WHERE datname = %s", name)
    return round(sum(cpu_seconds(int(pid)) for (pid,) in rows), 2)


def drain(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """The backlog drained by `count` engines: tasks/s and the CPU of each process."""
    tasks = args.executions * args.tasks
    with fresh_database() as url:
        asyncio.run(launch_backlog(url, args.executions, args.tasks))
        started = time.perf_counter()
        engines = start_engines(url, count, args.workers, args.parallelism)
        ready = time.perf_counter() - started
        done_when_ready = tasks_done(url)
        try:
            wait_until(lambda: unfinished(url) == 0, args.timeout, "the backlog")
            elapsed = time.perf_counter() - started
            cpu = [engine.cpu() for engine in engines]
            server = store_cpu(url)
        finally:
            stop_engines(engines)
    return {
        "bench": "scale_out",
        "engines": count,
        "executions": args.executions,
        "tasks": tasks,
        "seconds": round(elapsed, 2),
        "engines_ready_s": round(ready, 2),
        "tasks_per_s": round(tasks / elapsed, 1),
        "tasks_per_s_all_ready": round((tasks - done_when_ready) / (elapsed - ready), 1),
        "processes": cpu,
        "postgres_cpu_s": server,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def takeover(args: argparse.Namespace, count: int = 3) -> dict[str, Any]:
    """SIGKILL one of `count` engines while it drives executions: how long until the others
    claimed all it held, and until those succeeded."""
    with fresh_database() as url:
        asyncio.run(launch_backlog(url, args.executions, args.tasks))
        engines = start_engines(url, count, args.workers, args.parallelism)
        victim = engines[0]
        try:
            held_by = "SELECT id FROM executions WHERE owner = %s AND phase <> 'SUCCEEDED'"

            def victim_holds() -> bool:
                return bool(query(url, held_by, victim.engine_id))

            wait_until(victim_holds, args.timeout, "the victim claiming executions")
            victim.process.send_signal(signal.SIGKILL)
            killed = time.perf_counter()
            victim.process.wait()  # reaped: a zombie would still look alive
            orphans = [row[0] for row in query(url, held_by, victim.engine_id)]
            survivors = [e.engine_id for e in engines[1:]]
            sql = "SELECT owner, phase FROM executions WHERE id = ANY(%s)"

            def all_claimed() -> bool:
                rows = query(url, sql, orphans)
                return all(owner in survivors or phase == "SUCCEEDED" for owner, phase in rows)

            def all_done() -> bool:
                return all(phase == "SUCCEEDED" for _, phase in query(url, sql, orphans))

            claimed = wait_until(all_claimed, args.timeout, "the takeover")
            done = wait_until(all_done, args.timeout, "the orphans' end")
            backlog = wait_until(lambda: unfinished(url) == 0, args.timeout, "the backlog")
            return {
                "bench": "scale_out_takeover",
                "engines": count,
                "orphaned_executions": len(orphans),
                "claimed_by_survivors_s": round(claimed, 2),
                "orphans_succeeded_s": round(claimed + done, 2),
                "backlog_done_after_kill_s": round(time.perf_counter() - killed, 2),
                "backlog_left_s": round(backlog, 2),
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        finally:
            stop_engines(engines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=300, help="executions in the backlog")
    parser.add_argument("--tasks", type=int, default=10, help="no-op tasks per execution")
    parser.add_argument("--engines", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2, help="task workers per engine")
    parser.add_argument("--parallelism", type=int, default=20, help="per engine")
    parser.add_argument("--timeout", type=float, default=900.0, help="per measurement")
    parser.add_argument("--no-takeover", action="store_true", help="skip the SIGKILL run")
    parser.add_argument("--quick", action="store_true", help="60 x 10 tasks")
    args = parser.parse_args()
    if args.quick:
        args.executions, args.tasks = 60, 10
    for count in args.engines:
        print(json.dumps(drain(args, count)), flush=True)
    if not args.no_takeover:
        print(json.dumps(takeover(args)), flush=True)


if __name__ == "__main__":
    main()
