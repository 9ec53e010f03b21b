"""Cache reservation benchmark: herd wake-up latency and reservation calls/s (not a test).

Herd wake-up: one owner (this process) holds the reservation of a fresh key while a herd of
waiters (8 and 32) in OTHER processes wait for it; the figure is the time from just before the
owner's `Catalog.put` to the moment the LAST waiter has the entry, per round (p50/p99/max),
on SQLite and PostgreSQL. Target: p99 under 50 ms (upstream re-checks every 10 s).

Each waiter is what an engine is to the cache: its own Database, Notifier (production poll
interval: SQLite polls `PRAGMA data_version` every 20 ms; PostgreSQL LISTENs) and Catalog
(started, with its sweeper; the database clock on PostgreSQL), subscribed through
`Catalog.subscribe` to the engine's own `Scheduling.on_cache_key`. A round does what the
engine's cache gate does: `get` (a miss), `get_or_extend_reservation` (the owner's, so the
waiter holds none), `Scheduling.wait_for_cache(..., at_latest=expires_at)` (the slow fallback
timer), then it tells the owner it is ready. The owner puts (then releases, as the engine
does) only once every waiter of the herd is ready. A wake-up (or the timer) re-enqueues the
waiter, which re-runs `get` until it sees the entry and reports `time.monotonic()` then
(CLOCK_MONOTONIC: one clock for every process on the machine).

Hosting: by default one waiter per process (a herd of 32 is 32 processes, even on 2 cores);
`--waiters-per-process K` packs K waiters, each still with its own connections, in one
process. The processes are spawned once and kept across rounds, herds and backends; a herd
opens its waiters' connections in only as many of them as it needs. Two warm-up rounds per
herd are not counted. To show whether CPU contention, rather than the notification, decides
the figure, each line also gives the put to the last waiter's notice (`put_to_last_notice_ms`)
and the longest notice-to-entry time of a waiter (`notice_to_result_max_ms`). Each round uses
a fresh key. On PostgreSQL each waiter holds two connections (pool and LISTEN): a herd that
would not fit in max_connections is reported skipped.

Reservation calls/s: one client (one Catalog) calling `get_or_extend_reservation` in a loop,
for each of: extending its own reservation of one key, acquiring a fresh key each call, and
finding a key held by another owner (what a waiter does).

SQLite runs on a temporary file; PostgreSQL on a fresh database (`sluice_bench_<pid>_<hex>`,
created through the admin URL, upgraded, dropped WITH (FORCE) at the end). An unreachable
PostgreSQL prints a "skipped" line. One JSON line per measurement set.

    .venv/bin/python bench/cache.py                     # both backends, herds 8 and 32
    .venv/bin/python bench/cache.py --quick             # 10 rounds, 0.5 s per call mode
    .venv/bin/python bench/cache.py --backends sqlite --herds 8 --rounds 100
    .venv/bin/python bench/cache.py --waiters-per-process 4
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
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from sluice.cache import CacheEntry, Catalog, Reservation
from sluice.clock import SystemClock
from sluice.config import CacheConfig, EngineConfig
from sluice.engine.scheduling import Scheduling
from sluice.store.database import Database
from sluice.store.notify import WAKE_ALL, Notifier

TARGET_MS = 50.0
HEARTBEAT = CacheConfig().heartbeat_interval
OWNER = "bench-owner"
OTHER_OWNER = "bench-other-owner"
ENTRY = CacheEntry({"y": 1}, "bench.expensive", "v1")
WARMUP_ROUNDS = 2
REPORT_TIMEOUT = 90.0  # a bound on a hang (lost wake-ups still arrive by the 30 s timer)
# The poll interval of the SQLite notifier: Notifier's default, which the runtime uses.
SQLITE_POLL_MS = round(inspect.signature(Notifier).parameters["poll_interval"].default * 1000)
Message = tuple[Any, ...]
Queue = Any  # a multiprocessing queue of Message (its class is not generic at runtime)


# Waiter processes.


class Waiter:
    """One engine's view of the cache, waiting for one key per round as the engine does."""

    def __init__(
        self, name: str, db: Database, notifier: Notifier, catalog: Catalog, results: Queue
    ) -> None:
        self.name, self.db, self.notifier, self.catalog = name, db, notifier, catalog
        self.results = results
        self.scheduling = Scheduling(
            EngineConfig(), SystemClock(), self._enqueue, _no_node, None, {}
        )
        self.woken: asyncio.Queue[str] = asyncio.Queue()
        self.key: str | None = None
        self.noticed_at: float | None = None
        self.rechecks = 0
        self.unsubscribe = catalog.subscribe(self._on_key)  # as Engine.start does
        self.worker = asyncio.create_task(self._work())

    @classmethod
    async def open(cls, url: str, name: str, results: Queue) -> Waiter:
        db = await Database.open(url)
        notifier = Notifier(db, name)
        clock = None if db.dialect == "postgresql" else SystemClock()  # as Runtime does
        catalog = await Catalog.open(db, clock=clock, config=CacheConfig(), notifier=notifier)
        waiter = cls(name, db, notifier, catalog, results)
        await notifier.start()  # everything committed from now on is delivered
        await catalog.start()
        return waiter

    def _on_key(self, key: str) -> None:
        if self.key is not None and self.noticed_at is None and key in (self.key, WAKE_ALL):
            self.noticed_at = time.monotonic()
        self.scheduling.on_cache_key(key)

    def _enqueue(self, execution_id: str, node_ids: Iterable[str]) -> None:
        for node_id in node_ids:
            self.woken.put_nowait(node_id)  # node id = the key waited for

    async def begin(self, key: str) -> None:
        """The cache gate's first pass on a fresh key: a miss, someone else's reservation."""
        self.key, self.noticed_at, self.rechecks = key, None, 0
        if await self._check(key):
            raise RuntimeError(f"{key} was cached before the owner put it")
        self.results.put(("ready", key, self.name))

    async def _check(self, key: str) -> bool:
        """True on a hit; else wait (subscribed, and a timer at the reservation's expiry)."""
        if await self.catalog.get(key) is not None:
            return True
        held = await self.catalog.get_or_extend_reservation(key, self.name, HEARTBEAT)
        if held.owner_id == self.name:
            raise RuntimeError(f"waiter {self.name} acquired {key}: the owner should hold it")
        self.scheduling.wait_for_cache(key, self.name, key, held.expires_at)
        return False

    async def _work(self) -> None:
        try:
            while True:
                key = await self.woken.get()
                if key != self.key:
                    continue  # a timer of an earlier round
                self.rechecks += 1
                if await self._check(key):
                    got_at = time.monotonic()
                    self.key = None
                    self.results.put(
                        ("hit", key, self.name, got_at, self.noticed_at, self.rechecks)
                    )
        except Exception as exc:
            self.results.put(("error", self.name, repr(exc)))

    async def close(self) -> None:
        self.unsubscribe()
        self.worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.worker
        self.scheduling.cancel_timers()
        await self.catalog.close()
        await self.notifier.close()
        await self.db.close()


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
    """A waiter process: one session (url, waiter names) per herd, until a None command."""
    serving = True
    while serving and (command := _next_command(commands)) is not None:
        if command[0] != "session":
            continue  # what was left for a session that failed
        _, url, names, tag = command
        try:
            serving = asyncio.run(_host_session(index, url, names, tag, commands, results))
        except Exception as exc:
            results.put(("error", f"host-{index}", repr(exc)))


async def _host_session(
    index: int, url: str, names: list[str], tag: str, commands: Queue, results: Queue
) -> bool:
    """Run the herd's rounds until "end" (True: serve on) or None (False: exit)."""
    waiters: list[Waiter] = []
    try:
        for name in names:
            waiters.append(await Waiter.open(url, name, results))
        results.put(("up", tag, index))
        while (command := await asyncio.to_thread(_next_command, commands)) is not None:
            if command[0] == "end":
                break
            for waiter in waiters:
                await waiter.begin(command[1])
    finally:
        for waiter in waiters:
            await waiter.close()
    results.put(("closed", tag, index))
    return command is not None


@dataclass
class Hosts:
    """The spawned waiter processes, their command queues and the shared result queue.

    The owner talks to them through multiprocessing queues: nothing of the wake-up path."""

    procs: list[BaseProcess]
    commands: list[Queue]
    results: Queue
    per_process: int

    @classmethod
    def spawn(cls, count: int, per_process: int) -> Hosts:
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        commands = [ctx.Queue() for _ in range(count)]
        procs: list[BaseProcess] = [
            ctx.Process(target=host_main, args=(i, commands[i], results), daemon=True)
            for i in range(count)
        ]
        for proc in procs:
            proc.start()
        return cls(procs, commands, results, per_process)

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


async def measure_herd(
    owner: Owner, hosts: Hosts, url: str, backend: str, herd: int, rounds: int
) -> dict[str, Any]:
    counts = spread(herd, math.ceil(herd / hosts.per_process))
    used = list(range(len(counts)))
    tag = f"{backend}-{herd}-{secrets.token_hex(3)}"
    first = 0
    for index, count in zip(used, counts, strict=True):
        names = [f"bench-waiter-{first + i}" for i in range(count)]
        first += count
        hosts.commands[index].put(("session", url, names, tag))
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
    return herd_line(backend, herd, len(used), hosts.per_process, measured)


def herd_line(
    backend: str, herd: int, processes: int, per_process: int, rounds: list[Round]
) -> dict[str, Any]:
    last = summary([r.last_ms for r in rounds])
    notices = [r.last_notice_ms for r in rounds if r.last_notice_ms is not None]
    rechecks = [r.recheck_ms for r in rounds if r.recheck_ms is not None]
    notifier = (
        f"PRAGMA data_version polled every {SQLITE_POLL_MS} ms"
        if backend == "sqlite"
        else "LISTEN/NOTIFY"
    )
    return {
        "bench": "cache",
        "measure": "herd_wakeup",
        "backend": backend,
        "herd": herd,
        "rounds": len(rounds),
        "warmup_rounds": WARMUP_ROUNDS,
        "waiter_processes": processes,
        "waiters_per_process": per_process,
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


async def calls_per_second(
    call: Callable[[int], Awaitable[Reservation]], expected_owner: str, seconds: float
) -> tuple[float, float]:
    """(calls/s, mean ms per call) of awaiting `call(i)` back to back for `seconds`."""
    for i in range(20):  # warm-up: connections and compiled statements
        await call(-1 - i)
    calls = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        held = await call(calls)
        if held.owner_id != expected_owner:
            raise RuntimeError(f"expected {expected_owner}'s reservation, got {held}")
        calls += 1
    elapsed = time.perf_counter() - started
    return calls / elapsed, elapsed / calls * 1000


async def measure_calls(owner: Owner, backend: str, seconds: float) -> dict[str, Any]:
    catalog, prefix = owner.catalog, f"bench/calls/{secrets.token_hex(3)}"
    await catalog.get_or_extend_reservation(f"{prefix}/theirs", OTHER_OWNER, HEARTBEAT)

    async def extend_own(_: int) -> Reservation:
        return await catalog.get_or_extend_reservation(f"{prefix}/mine", OWNER, HEARTBEAT)

    async def acquire_fresh(i: int) -> Reservation:
        return await catalog.get_or_extend_reservation(f"{prefix}/fresh/{i}", OWNER, HEARTBEAT)

    async def held_elsewhere(_: int) -> Reservation:
        return await catalog.get_or_extend_reservation(f"{prefix}/theirs", OWNER, HEARTBEAT)

    modes = {
        "extend_own": (extend_own, OWNER),
        "acquire_fresh": (acquire_fresh, OWNER),
        "held_elsewhere": (held_elsewhere, OTHER_OWNER),
    }
    rates, means = {}, {}
    for mode, (call, expected) in modes.items():
        rate, mean_ms = await calls_per_second(call, expected, seconds)
        rates[mode], means[mode] = round(rate), round(mean_ms, 3)
    return {
        "bench": "cache",
        "measure": "get_or_extend_reservation",
        "backend": backend,
        "clients": 1,
        "seconds_per_mode": seconds,
        "clock": "database server" if backend == "postgresql" else "system",
        "calls_per_s": rates,
        "mean_ms_per_call": means,
    }


# Backends.


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


async def bench_backend(url: str, backend: str, args: argparse.Namespace, hosts: LazyHosts) -> None:
    owner = await Owner.open(url)
    try:
        for herd in args.herds:
            short = pg_headroom_shortfall(url, herd) if backend == "postgresql" else None
            if short is not None:
                emit(skipped(backend, short, "herd_wakeup", herd=herd))
                continue
            emit(await measure_herd(owner, hosts.get(), url, backend, herd, args.rounds))
        emit(await measure_calls(owner, backend, args.seconds))
    finally:
        await owner.close()


def skipped(backend: str, reason: str, measure: str = "all", **extra: Any) -> dict[str, Any]:
    line = {"bench": "cache", "measure": measure, "backend": backend, **extra}
    return {**line, "skipped": True, "reason": reason}


def pg_headroom_shortfall(url: str, herd: int) -> str | None:
    """Why a herd would not fit in max_connections (each waiter: a pooled and a LISTEN
    connection), or None."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int"
            " - (SELECT count(*) FROM pg_stat_activity)"
        ).fetchone()
    free = int(row[0]) if row else 0
    needed = 2 * herd + 2
    return None if free >= needed else f"{needed} connections needed, {free} free"


class LazyHosts:
    """Spawns the waiter processes when a herd first needs them (not at all if none does)."""

    def __init__(self, count: int, per_process: int) -> None:
        self.count, self.per_process = count, per_process
        self.hosts: Hosts | None = None

    def get(self) -> Hosts:
        if self.hosts is None:
            self.hosts = Hosts.spawn(self.count, self.per_process)
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
        help="measured rounds per herd (default: 50; --quick: 10)",
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
        default=1,
        help="waiters hosted per process, each with its own connections (default: 1)",
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
    if args.rounds < 1 or min(args.herds) < 1 or args.waiters_per_process < 1:
        parser.error("--rounds, --herds and --waiters-per-process must be positive")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    # A SIGTERM cleans up like Ctrl-C: the database is dropped, the waiter processes stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    hosts = LazyHosts(
        math.ceil(max(args.herds) / args.waiters_per_process), args.waiters_per_process
    )
    try:
        for backend in args.backends:
            (run_sqlite if backend == "sqlite" else run_postgresql)(args, hosts)
    finally:
        hosts.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
