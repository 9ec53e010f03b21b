"""Cache reservation benchmark: herd wake-up latency and reservation calls/s (not a test).

Herd wake-up: one owner (this process) holds the reservation of a fresh key while a herd of
waiters (8 and 32) in OTHER processes wait for it; the figure is the time from just before the
owner's `Catalog.put` to the moment the LAST waiter has the entry, per round (p50/p99/max),
on SQLite and PostgreSQL. Target: p99 under 50 ms (upstream re-checks every 10 s).

A waiter is a waiting node, hosted by an engine; the engine is built as Runtime and Engine
build it: its own Database, Notifier (SQLite: a datagram from the committing process, with
`PRAGMA data_version` polled every 500 ms as a fallback; PostgreSQL LISTENs), Catalog
(started, with its sweeper; the database clock on PostgreSQL) and NodeAdmission, the Catalog
subscribed once through `Catalog.subscribe` to `NodeAdmission.on_cache_key`, and a queue of
woken waiters drained by the engine's workers (`engine_workers`, Engine's 4). A round does,
for each waiter, what the engine's cache gate does: `get` (a miss),
`get_or_extend_reservation` (the owner's, so the waiter holds none),
`NodeAdmission.wait_for_cache(..., at_latest=expires_at)` (the slow fallback timer), then it
tells the owner it is ready. The owner puts (then releases, as the engine does) only once
every waiter of the herd is ready. A wake-up (or the timer) re-enqueues the waiter, which
re-runs `get` until it sees the entry and reports `time.monotonic()` then (CLOCK_MONOTONIC:
one clock for every process on the machine).

Hosting (`hosting` in each line), two shapes:
- "processes" (the worst case): every waiter is an engine of its own, one per process (a herd
  of 32 is 32 processes, even on 2 cores); `--waiters-per-process K` packs K such engines,
  each still with its own connections, in one process.
- "engines" (how production looks): `--engines E` spreads a herd over E engine processes as
  evenly as possible (`waiters_per_engine`: the most any engine hosts), each ONE engine whose
  waiters share its Database, Notifier, Catalog and NodeAdmission: one notice per engine wakes
  its waiters, their re-checks share the engine's workers and connection pool, and
  concurrent `get`s of the key may share one read.
With neither option both shapes run: one waiter per process and 4 engines (a herd of 8 is
4 engines x 2 waiters, a herd of 32 is 4 x 8); with either, only the shapes given.

The processes are spawned once (as many as the largest hosting needs) and kept across
rounds, herds, hostings and backends; a herd opens its engines in only as many of them as it
needs. Two warm-up rounds per herd and hosting are not counted. To show whether CPU
contention, rather than the notification, decides the figure, each line also gives the put
to the last engine's notice (`put_to_last_notice_ms`) and the longest time from a waiter's
engine's notice to the waiter having the entry (`notice_to_result_max_ms`; with several
waiters per engine it includes the wait for a worker). Each round uses a fresh key. On
PostgreSQL an engine holds a LISTEN connection and one pooled connection per concurrent
operation (at most one per worker): a herd that would not fit in max_connections is reported
skipped.

Reservation calls/s: one client (one Catalog) calling `get_or_extend_reservation` in a loop,
for each of: extending its own reservation of one key, acquiring a fresh key each call, and
finding a key held by another owner (what a waiter does); the three modes alternate in rounds
with the store's bare limit (`store_limits.py`: a CAS UPDATE + commit in WAL NORMAL on
SQLite, a one-statement psycopg 3 upsert on PostgreSQL), and the line gives each mode's
`ratio` to it. `--herds 0` measures the calls only.

SQLite runs on a temporary file; PostgreSQL on a fresh database (`sluice_bench_<pid>_<hex>`,
created through the admin URL, upgraded, dropped WITH (FORCE) at the end). An unreachable
PostgreSQL prints a "skipped" line. One JSON line per measurement set.

    .venv/bin/python bench/cache.py                     # both backends, herds 8 and 32, both
                                                        # hostings
    .venv/bin/python bench/cache.py --quick             # 10 rounds, 0.5 s per call mode
    .venv/bin/python bench/cache.py --backends sqlite --herds 8 --rounds 100
    .venv/bin/python bench/cache.py --waiters-per-process 4
    .venv/bin/python bench/cache.py --engines 2         # engine-hosted herds only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Literal

import store_limits
from prometheus_client import CollectorRegistry

from sluice.cache import CacheEntry, Catalog
from sluice.clock import SystemClock
from sluice.config import CacheConfig, EngineConfig
from sluice.engine.admission import NodeAdmission
from sluice.engine.engine import RECONCILE_WORKERS as ENGINE_WORKERS
from sluice.store.database import Database
from sluice.store.notify import WAKE_ALL, Notifier

TARGET_MS = 50.0
HEARTBEAT = CacheConfig().heartbeat_interval
OWNER = "bench-owner"
OTHER_OWNER = "bench-other-owner"
ENTRY = CacheEntry({"y": 1}, "bench.expensive", "v1")
WARMUP_ROUNDS = 2
DEFAULT_ENGINES = 4  # the engines of the default run's engine-hosted herds
REPORT_TIMEOUT = 90.0  # a bound on a hang (lost wake-ups still arrive by the 30 s timer)
# The poll interval of the SQLite notifier: Notifier's default, which the runtime uses.
SQLITE_FALLBACK_MS = round(
    inspect.signature(Notifier).parameters["fallback_interval"].default * 1000
)
Message = tuple[Any, ...]
Queue = Any  # a multiprocessing queue of Message (its class is not generic at runtime)


# Waiter processes.


class BenchEngine:
    """One engine's cache machinery hosting waiting nodes, as Runtime and Engine build it:
    ONE Database, Notifier, Catalog and NodeAdmission shared by every waiter it hosts, the
    catalog subscribed once to `NodeAdmission.on_cache_key` (Engine.start), and the engine's
    queue of woken executions drained by ENGINE_WORKERS workers (Engine._work)."""

    def __init__(
        self,
        name: str,
        db: Database,
        notifier: Notifier,
        catalog: Catalog,
        names: Sequence[str],
        results: Queue,
    ) -> None:
        self.name, self.db, self.notifier, self.catalog = name, db, notifier, catalog
        self.results = results
        self.scheduling = NodeAdmission(
            EngineConfig(), SystemClock(), self._enqueue, _no_node, None, {}
        )
        self.waiters = {name: Waiter(name, self) for name in names}
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.queued: set[str] = set()
        self.key: str | None = None  # this round's key
        self.pending = 0  # waiters of this round that have not seen the entry yet
        self.noticed_at: float | None = None
        self.unsubscribe = catalog.subscribe(self._on_key)  # as Engine.start does
        self.workers = [asyncio.create_task(self._work()) for _ in range(ENGINE_WORKERS)]

    @classmethod
    async def open(cls, url: str, name: str, names: Sequence[str], results: Queue) -> BenchEngine:
        db = await Database.open(url)
        notifier = Notifier(db, name, clock=SystemClock())  # as Runtime does
        clock = None if db.dialect == "postgresql" else SystemClock()  # as Runtime does
        catalog = await Catalog.open(
            db, clock=clock, config=CacheConfig(), metrics=CollectorRegistry(), notifier=notifier
        )
        engine = cls(name, db, notifier, catalog, names, results)
        await notifier.start()  # everything committed from now on is delivered
        await catalog.start()
        return engine

    def _on_key(self, key: str) -> None:
        if self.pending and self.noticed_at is None and key in (self.key, WAKE_ALL):
            self.noticed_at = time.monotonic()
        self.scheduling.on_cache_key(key)

    def _enqueue(self, execution_id: str, node_ids: Iterable[str]) -> None:
        """Engine.enqueue: note the node (id = the key waited for), queue the execution once."""
        waiter = self.waiters.get(execution_id)
        if waiter is None:
            return
        waiter.todo.update(node_ids)
        if execution_id not in self.queued:
            self.queued.add(execution_id)
            self.queue.put_nowait(execution_id)

    async def _work(self) -> None:
        try:
            while True:
                execution_id = await self.queue.get()
                self.queued.discard(execution_id)
                await self.waiters[execution_id].recheck()
        except Exception as exc:
            self.results.put(("error", self.name, repr(exc)))

    async def begin(self, key: str) -> None:
        """A round: every hosted waiter takes the cache gate's first pass on `key`, in turn."""
        self.key, self.pending, self.noticed_at = key, len(self.waiters), None
        for waiter in self.waiters.values():
            await waiter.begin(key)

    async def close(self) -> None:
        self.unsubscribe()
        for worker in self.workers:
            worker.cancel()
        for worker in self.workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        self.scheduling.cancel_timers()
        await self.catalog.close()
        await self.notifier.close()
        await self.db.close()


class Waiter:
    """A waiting node of an engine (its own execution), going through the cache gate."""

    def __init__(self, name: str, engine: BenchEngine) -> None:
        self.name, self.engine = name, engine
        self.key: str | None = None  # the key waited for; None once seen (or between rounds)
        self.todo: set[str] = set()  # keys woken for since the last check (ExecutionState.todo)
        self.rechecks = 0
        self.checking = asyncio.Lock()  # two workers never check one waiter at once

    async def begin(self, key: str) -> None:
        """The cache gate's first pass on a fresh key: a miss, someone else's reservation."""
        self.key, self.rechecks = key, 0
        if await self._check(key):
            raise RuntimeError(f"{key} was cached before the owner put it")
        self.engine.results.put(("ready", key, self.name))

    async def recheck(self) -> None:
        """Woken (by a notice or the timer): re-run the gate if woken for this round's key."""
        async with self.checking:
            todo, self.todo = self.todo, set()
            key = self.key
            if key is None or key not in todo:
                return  # a timer of an earlier round, or already seen
            self.rechecks += 1
            if await self._check(key):
                got_at = time.monotonic()
                self.key = None
                self.engine.pending -= 1
                noticed_at = self.engine.noticed_at
                self.engine.results.put(("hit", key, self.name, got_at, noticed_at, self.rechecks))

    async def _check(self, key: str) -> bool:
        """True on a hit; else wait (subscribed, and a timer at the reservation's expiry)."""
        catalog = self.engine.catalog
        if await catalog.get(key) is not None:
            return True
        held = await catalog.get_or_extend_reservation(key, self.name, HEARTBEAT)
        if held.owner_id == self.name:
            raise RuntimeError(f"waiter {self.name} acquired {key}: the owner should hold it")
        self.engine.scheduling.wait_for_cache(key, self.name, key, held.expires_at)
        return False


def _no_node(execution_id: str, node_id: str) -> None:
    return None


def _next_command(commands: Queue) -> Message | None:
    """The next command; stop when the owner process is gone (never linger)."""
    while True:
        try:
            command: Message | None = commands.get(timeout=1.0)
            return command
        except queue.Empty:
            parent = multiprocessing.parent_process()
            if parent is not None and not parent.is_alive():
                return None


def host_main(index: int, commands: Queue, results: Queue) -> None:
    """A waiter process: one session (url, engines) per herd, until a None command."""
    serving = True
    while serving and (command := _next_command(commands)) is not None:
        if command[0] != "session":
            continue  # what was left for a session that failed
        _, url, engines, tag = command
        try:
            serving = asyncio.run(_host_session(index, url, engines, tag, commands, results))
        except Exception as exc:
            results.put(("error", f"host-{index}", repr(exc)))


async def _host_session(
    index: int,
    url: str,
    engines: list[tuple[str, list[str]]],
    tag: str,
    commands: Queue,
    results: Queue,
) -> bool:
    """Run the herd's rounds until "end" (True: serve on) or None (False: exit).

    `engines`: (engine name, the names of the waiters it hosts) per engine in this process."""
    opened: list[BenchEngine] = []
    try:
        for name, waiters in engines:
            opened.append(await BenchEngine.open(url, name, waiters, results))
        results.put(("up", tag, index))
        while (command := await asyncio.to_thread(_next_command, commands)) is not None:
            if command[0] == "end":
                break
            for engine in opened:
                await engine.begin(command[1])
    finally:
        for engine in opened:
            await engine.close()
    results.put(("closed", tag, index))
    return command is not None


@dataclass
class Hosts:
    """The spawned waiter processes, their command queues and the shared result queue.

    The owner talks to them through multiprocessing queues: nothing of the wake-up path."""

    procs: list[BaseProcess]
    commands: list[Queue]
    results: Queue

    @classmethod
    def spawn(cls, count: int) -> Hosts:
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        commands = [ctx.Queue() for _ in range(count)]
        procs: list[BaseProcess] = [
            ctx.Process(target=host_main, args=(i, commands[i], results), daemon=True)
            for i in range(count)
        ]
        for proc in procs:
            proc.start()
        return cls(procs, commands, results)

    def stop(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for proc in self.procs:
            proc.join(timeout=30)
        for proc in self.procs:
            if proc.is_alive():  # only the processes this benchmark started, by handle
                proc.terminate()
                proc.join(timeout=10)

    async def collect(self, kind: str, tag: str, count: int) -> list[Message]:
        """`count` reports of `kind` for `tag`; fails on an error report, a dead waiter
        process or REPORT_TIMEOUT seconds without a report."""
        got: list[Message] = []
        while len(got) < count:
            message = await asyncio.to_thread(self._next_report, kind, len(got), count)
            if message[0] == "error":
                raise RuntimeError(f"waiter {message[1]} failed: {message[2]}")
            if message[:2] != (kind, tag):
                raise RuntimeError(f"expected {kind!r} of {tag!r}, got {message!r}")
            got.append(message)
        return got

    def _next_report(self, kind: str, got: int, count: int) -> Message:
        # Short gets: a cancelled collect frees its thread at once, and dead hosts show.
        deadline = time.monotonic() + REPORT_TIMEOUT
        while time.monotonic() < deadline:
            try:
                message: Message = self.results.get(timeout=0.25)
                return message
            except queue.Empty:
                dead = {p.pid: p.exitcode for p in self.procs if p.exitcode is not None}
                if dead:
                    raise RuntimeError(
                        f"waiter processes exited (pid: exit code): {dead}"
                    ) from None
        raise RuntimeError(f"{got}/{count} {kind!r} reports in {REPORT_TIMEOUT}s")


# The owner.


@dataclass
class Owner:
    db: Database
    notifier: Notifier
    catalog: Catalog

    @classmethod
    async def open(cls, url: str) -> Owner:
        db = await Database.open(url, upgrade=True)
        notifier = Notifier(db, OWNER)
        await notifier.start()
        clock = None if db.dialect == "postgresql" else SystemClock()
        catalog = await Catalog.open(db, clock=clock, config=CacheConfig(), notifier=notifier)
        await catalog.start()
        return cls(db, notifier, catalog)

    async def close(self) -> None:
        await self.catalog.close()
        await self.notifier.close()
        await self.db.close()


@dataclass(frozen=True)
class Round:
    last_ms: float
    first_ms: float
    put_ms: float
    last_notice_ms: float | None
    recheck_ms: float | None
    unnoticed: int


async def herd_round(owner: Owner, hosts: Hosts, used: list[int], herd: int, key: str) -> Round:
    held = await owner.catalog.get_or_extend_reservation(key, OWNER, HEARTBEAT)
    if held.owner_id != OWNER:
        raise RuntimeError(f"the owner did not get {key}: {held}")
    for index in used:
        hosts.commands[index].put(("round", key))
    await hosts.collect("ready", key, herd)  # every waiter missed and is subscribed
    started = time.monotonic()
    if not await owner.catalog.put(key, ENTRY):
        raise RuntimeError(f"{key} was already cached")
    put_done = time.monotonic()
    await owner.catalog.release_reservation(key, OWNER)  # as the cache gate does after a put
    hits = await hosts.collect("hit", key, herd)
    got = [hit[3] - started for hit in hits]
    noticed = [(hit[3], hit[4]) for hit in hits if hit[4] is not None]
    return Round(
        last_ms=max(got) * 1000,
        first_ms=min(got) * 1000,
        put_ms=(put_done - started) * 1000,
        last_notice_ms=(max(n for _, n in noticed) - started) * 1000 if noticed else None,
        recheck_ms=max(g - n for g, n in noticed) * 1000 if noticed else None,
        unnoticed=herd - len(noticed),
    )


def spread(waiters: int, hosts: int) -> list[int]:
    """Waiters per host: `waiters` as evenly as possible over `hosts` hosts."""
    return [waiters // hosts + (1 if i < waiters % hosts else 0) for i in range(hosts)]


@dataclass(frozen=True)
class Hosting:
    """How a herd is hosted. "processes": every waiter is an engine of its own (its own
    Database, Notifier, Catalog and NodeAdmission), `size` of them per process. "engines": the
    herd is spread over `size` engine processes, each one engine shared by its waiters."""

    kind: Literal["processes", "engines"]
    size: int

    def layout(self, herd: int) -> list[list[int]]:
        """Per process used, the number of waiters of each engine it hosts."""
        if self.kind == "processes":
            return [[1] * count for count in spread(herd, math.ceil(herd / self.size))]
        return [[count] for count in spread(herd, min(self.size, herd))]

    def connections(self, herd: int) -> int:
        """PostgreSQL connections the herd may hold: per engine, its LISTEN connection and,
        per concurrent operation (at most one per worker), one pooled connection (entry
        reads) and one direct connection (reservation claims: store/pgdirect.py)."""
        engines = [waiters for process in self.layout(herd) for waiters in process]
        return sum(1 + 2 * min(waiters, ENGINE_WORKERS) for waiters in engines)


async def measure_herd(
    owner: Owner, hosts: Hosts, url: str, backend: str, herd: int, hosting: Hosting, rounds: int
) -> dict[str, Any]:
    layout = hosting.layout(herd)
    used = list(range(len(layout)))
    tag = f"{backend}-{herd}-{hosting.kind}-{secrets.token_hex(3)}"
    first = 0
    for index, engines in zip(used, layout, strict=True):
        session: list[tuple[str, list[str]]] = []
        for count in engines:
            names = [f"bench-waiter-{first + i}" for i in range(count)]
            first += count
            engine = names[0] if hosting.kind == "processes" else f"bench-engine-{index}"
            session.append((engine, names))
        hosts.commands[index].put(("session", url, session, tag))
    try:
        await hosts.collect("up", tag, len(used))
        measured: list[Round] = []
        for number in range(WARMUP_ROUNDS + rounds):
            key = f"bench/{tag}/round-{number}"
            result = await herd_round(owner, hosts, used, herd, key)
            if number >= WARMUP_ROUNDS:
                measured.append(result)
    finally:
        for index in used:
            hosts.commands[index].put(("end",))
    await hosts.collect("closed", tag, len(used))
    return herd_line(backend, herd, hosting, layout, measured)


def herd_line(
    backend: str, herd: int, hosting: Hosting, layout: list[list[int]], rounds: list[Round]
) -> dict[str, Any]:
    last = summary([r.last_ms for r in rounds])
    notices = [r.last_notice_ms for r in rounds if r.last_notice_ms is not None]
    rechecks = [r.recheck_ms for r in rounds if r.recheck_ms is not None]
    notifier = (
        "a datagram beside the file (store/localwake.py), PRAGMA data_version polled every"
        f" {SQLITE_FALLBACK_MS} ms as a fallback"
        if backend == "sqlite"
        else "LISTEN/NOTIFY"
    )
    engines = [waiters for process in layout for waiters in process]
    return {
        "bench": "cache",
        "measure": "herd_wakeup",
        "backend": backend,
        "herd": herd,
        "rounds": len(rounds),
        "warmup_rounds": WARMUP_ROUNDS,
        "hosting": hosting.kind,
        "waiter_processes": len(layout),
        "waiters_per_process": (
            hosting.size if hosting.kind == "processes" else max(map(sum, layout))
        ),
        "engines": len(engines),
        "waiters_per_engine": max(engines),
        "engine_workers": ENGINE_WORKERS,
        "cpus": os.cpu_count(),
        "notifier": notifier,
        "put_to_last_waiter_ms": last,
        "put_to_first_waiter_ms": summary([r.first_ms for r in rounds]),
        "owner_put_ms": summary([r.put_ms for r in rounds]),
        "put_to_last_notice_ms": summary(notices) if notices else None,
        "notice_to_result_max_ms": summary(rechecks) if rechecks else None,
        "waiter_rounds_without_notice": sum(r.unnoticed for r in rounds),
        "target_p99_under_50ms": last["p99"] < TARGET_MS,
    }


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50, p99 (inclusive interpolation between closest ranks) and max, in ms."""
    ordered = sorted(values)
    p99 = (
        statistics.quantiles(ordered, n=100, method="inclusive")[98]
        if len(ordered) > 1
        else ordered[0]
    )
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(p99, 2),
        "max": round(ordered[-1], 2),
    }


# Reservation calls/s from one client.


async def measure_calls(owner: Owner, url: str, backend: str, seconds: float) -> dict[str, Any]:
    """Calls/s of each mode, alternating in rounds with the store's bare limit (a CAS UPDATE
    + commit on SQLite, a one-statement upsert on PostgreSQL: `store_limits.py`)."""
    catalog, prefix = owner.catalog, f"bench/calls/{secrets.token_hex(3)}"
    await catalog.get_or_extend_reservation(f"{prefix}/theirs", OTHER_OWNER, HEARTBEAT)
    fresh = 0

    async def expect(key: str, owner_id: str) -> None:
        held = await catalog.get_or_extend_reservation(key, OWNER, HEARTBEAT)
        if held.owner_id != owner_id:
            raise RuntimeError(f"expected {owner_id}'s reservation, got {held}")

    async def extend_own() -> None:
        await expect(f"{prefix}/mine", OWNER)

    async def acquire_fresh() -> None:
        nonlocal fresh
        fresh += 1
        await expect(f"{prefix}/fresh/{fresh}", OWNER)

    async def held_elsewhere() -> None:
        await expect(f"{prefix}/theirs", OTHER_OWNER)

    limit: Any = (
        store_limits.PostgresUpsert(url) if backend == "postgresql" else store_limits.SqliteCas()
    )
    await limit.open()
    modes: dict[str, store_limits.Step] = {
        "extend_own": extend_own,
        "acquire_fresh": acquire_fresh,
        "held_elsewhere": held_elsewhere,
    }
    try:
        rates = await store_limits.alternate({**modes, limit.name: limit.step}, seconds * 3)
    finally:
        await limit.close()
    return {
        "bench": "cache",
        "measure": "get_or_extend_reservation",
        "backend": backend,
        "clients": 1,
        "seconds_per_mode": seconds,
        "clock": "database server" if backend == "postgresql" else "system",
        "calls_per_s": {mode: round(rates[mode]) for mode in modes},
        "mean_ms_per_call": {mode: round(1000 / rates[mode], 3) for mode in modes},
        "limit": limit.name,
        "limit_per_s": round(rates[limit.name]),
        "ratio": {mode: round(rates[mode] / rates[limit.name], 3) for mode in modes},
    }


# Backends.


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


async def bench_backend(url: str, backend: str, args: argparse.Namespace, hosts: LazyHosts) -> None:
    owner = await Owner.open(url)
    try:
        for herd in args.herds:
            for hosting in args.hostings:
                short = (
                    pg_headroom_shortfall(url, hosting.connections(herd))
                    if backend == "postgresql"
                    else None
                )
                if short is not None:
                    extra = {"herd": herd, "hosting": hosting.kind, "size": hosting.size}
                    emit(skipped(backend, short, "herd_wakeup", **extra))
                    continue
                line = await measure_herd(
                    owner, hosts.get(), url, backend, herd, hosting, args.rounds
                )
                emit(line)
        emit(await measure_calls(owner, url, backend, args.seconds))
    finally:
        await owner.close()


def skipped(backend: str, reason: str, measure: str = "all", **extra: Any) -> dict[str, Any]:
    line = {"bench": "cache", "measure": measure, "backend": backend, **extra}
    return {**line, "skipped": True, "reason": reason}


def pg_headroom_shortfall(url: str, herd_connections: int) -> str | None:
    """Why a herd holding `herd_connections` (and the owner: a pooled and a LISTEN
    connection) would not fit in max_connections, or None."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int"
            " - (SELECT count(*) FROM pg_stat_activity)"
        ).fetchone()
    free = int(row[0]) if row else 0
    needed = herd_connections + 2
    return None if free >= needed else f"{needed} connections needed, {free} free"


class LazyHosts:
    """Spawns the waiter processes when a herd first needs them (not at all if none does)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.hosts: Hosts | None = None

    def get(self) -> Hosts:
        if self.hosts is None:
            self.hosts = Hosts.spawn(self.count)
        return self.hosts

    def stop(self) -> None:
        if self.hosts is not None:
            self.hosts.stop()
            self.hosts = None


def run_sqlite(args: argparse.Namespace, hosts: LazyHosts) -> None:
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-cache-"))
    try:
        asyncio.run(bench_backend(f"sqlite:///{work / 'sluice.db'}", "sqlite", args, hosts))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_postgresql(args: argparse.Namespace, hosts: LazyHosts) -> None:
    try:
        import psycopg
    except ImportError as exc:
        emit(skipped("postgresql", f"psycopg is not installed: {exc}"))
        return
    name = f"sluice_bench_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(args.pg_admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        emit(skipped("postgresql", f"cannot create a database via {args.pg_admin_url}: {reason}"))
        return
    base = args.pg_admin_url.rsplit("/", 1)[0]
    try:
        asyncio.run(bench_backend(f"{base}/{name}", "postgresql", args, hosts))
    finally:
        with psycopg.connect(args.pg_admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Command line.


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=["sqlite", "postgresql"],
        default=["sqlite", "postgresql"],
        help="default: both",
    )
    parser.add_argument(
        "--herds", nargs="+", type=int, default=[8, 32], help="waiters per herd (default: 8 32)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="measured rounds per herd and hosting (default: 50; --quick: 10)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="seconds per get_or_extend_reservation mode (default: 3; --quick: 0.5)",
    )
    parser.add_argument(
        "--waiters-per-process",
        type=int,
        default=None,
        metavar="K",
        help="host each waiter as an engine of its own, K per process (default: 1)",
    )
    parser.add_argument(
        "--engines",
        type=int,
        default=None,
        metavar="E",
        help="spread a herd over E engine processes whose waiters share the engine's Database,"
        f" Notifier, Catalog and NodeAdmission (default: {DEFAULT_ENGINES}; with neither hosting"
        " option both hostings run, with either only those given)",
    )
    parser.add_argument(
        "--pg-admin-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="where the scratch database is created and dropped (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="10 rounds, 0.5 s per call mode")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 10 if args.quick else 50
    if args.seconds is None:
        args.seconds = 0.5 if args.quick else 3.0
    sizes = [args.waiters_per_process, args.engines]
    if args.rounds < 1 or min(args.herds) < 0 or any(n is not None and n < 1 for n in sizes):
        parser.error("--rounds, --herds, --waiters-per-process and --engines must be positive")
    args.herds = [herd for herd in args.herds if herd > 0]  # --herds 0: the calls only
    if args.waiters_per_process is None and args.engines is None:
        args.waiters_per_process, args.engines = 1, DEFAULT_ENGINES
    args.hostings = [
        *([Hosting("processes", args.waiters_per_process)] if args.waiters_per_process else []),
        *([Hosting("engines", args.engines)] if args.engines else []),
    ]
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    # A SIGTERM cleans up like Ctrl-C: the database is dropped, the waiter processes stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # The processes are shared by every hosting: as many as the most any herd uses.
    hosts = LazyHosts(
        max((len(h.layout(herd)) for h in args.hostings for herd in args.herds), default=0)
    )
    try:
        for backend in args.backends:
            (run_sqlite if backend == "sqlite" else run_postgresql)(args, hosts)
    finally:
        hosts.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
