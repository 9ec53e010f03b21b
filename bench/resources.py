"""Resource manager benchmark: throughput, hand-off latency and over-allocation, per backend.

    .venv/bin/python bench/resources.py                       # every backend that is reachable
    .venv/bin/python bench/resources.py --backends redis --quick

For each backend (memory, SQLite, PostgreSQL, Redis) one JSON line with:

- `pairs_per_s_1_client`: allocate + release pairs per second from one client, no contention;
- `pairs_per_s_16_clients`: the same from 16 clients (separate processes, each with its own
  manager and connection; tasks of one process for `memory://`, which is not shared) contending
  for a quota of 8; a refused client waits for a wake-up, as the engine does, then asks again;
- `over_allocations`: grants made while the quota was already full, from the clients' log of
  (granted, releasing) moments on the system-wide monotonic clock. Each logged interval lies
  inside the true holding time, so a count above zero is a real over-allocation;
- `handoff_ms`: p50/p99/max from one process's release to the grant of a claim that another
  process was waiting with (quota 1, the two processes taking turns).

Then one line for the reference: Flyte v1's Redis algorithm re-implemented (SISMEMBER, SCARD,
SMEMBERS scanned for a project constraint, SADD; release is SREM; no lease, no queue, no
wake-up: a refused claim is asked again every `--reference-poll` seconds), measured the same
way.

The SQLite, PostgreSQL and Redis lines also have:

- `handoff_in_process_ms`: the same hand-off between two clients sharing one manager;
- `pairs_vs_limit`: our pairs from one client (`rate`) against the store's bare limit measured
  in the same process in alternating rounds (`limit_rate`; see `store_limits.py`: a CAS
  UPDATE + commit in WAL NORMAL on SQLite, a one-statement upsert on PostgreSQL, two PINGs on
  Redis) and their `ratio`; on Redis also `noop_scripts_ratio`, two no-op scripts carrying
  an allocate's and a release's arguments against the PINGs.

PostgreSQL at 127.0.0.1:5432 (a database created for the run and dropped) and Redis at
127.0.0.1:6379 (a key prefix of the run, deleted) are skipped when unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import secrets
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import store_limits

from sluice.clock import SystemClock
from sluice.resources import Claim, Holder, QuotaManager, ResourceConstraintsSpec, from_url
from sluice.store.database import Database

NAMESPACE = "bench"
HANDOFF = "handoff"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"
RETRY = 1.0
"""A waiting client asks again this often even without a wake-up (wake-ups are the norm)."""

Interval = tuple[int, int]


@dataclass(frozen=True)
class Target:
    """Where a run keeps its tokens."""

    backend: str
    url: str
    key_prefix: str = "sluice"


class Client(Protocol):
    """One client of a resource manager: ours or the reference."""

    async def allocate(self, token: str) -> bool: ...

    async def release(self, token: str) -> None: ...

    async def wait_for_room(self) -> None:
        """Return when a refused claim is worth asking again."""
        ...

    async def close(self) -> None: ...


class SluiceClient:
    """A QuotaManager of its own, woken by the backend's notifications."""

    def __init__(self, target: Target, namespace: str, quota: int, index: int) -> None:
        self._manager = QuotaManager(
            from_url(target.url, key_prefix=target.key_prefix),
            clock=SystemClock(),
            config_quotas={namespace: quota},
            lease=120.0,
        )
        self._claims = [Claim(namespace, constraints=ResourceConstraintsSpec(project_scope=quota))]
        self._namespaces = [namespace]
        self._holder = Holder("bench", "dev", f"x{index}", "n")
        self._woken = asyncio.Event()

    @classmethod
    async def open(cls, target: Target, namespace: str, quota: int, index: int) -> SluiceClient:
        client = cls(target, namespace, quota, index)
        await client._manager.start()
        client._manager.subscribe(lambda name: client._woken.set())
        return client

    @classmethod
    def sharing(cls, other: SluiceClient, index: int) -> SluiceClient:
        """A client on `other`'s manager (for memory://, which one process owns)."""
        client = cls.__new__(cls)
        client._manager, client._claims = other._manager, other._claims
        client._namespaces = other._namespaces
        client._holder = Holder("bench", "dev", f"x{index}", "n")
        client._woken = asyncio.Event()
        client._manager.subscribe(lambda name: client._woken.set())
        return client

    async def allocate(self, token: str) -> bool:
        self._woken.clear()  # before asking: a release after the answer still wakes us
        return (await self._manager.allocate(token, self._claims, self._holder)).granted

    async def release(self, token: str) -> None:
        await self._manager.release(token, self._namespaces)

    async def wait_for_room(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RETRY):
                await self._woken.wait()

    async def close(self) -> None:
        await self._manager.close()


class FlyteV1Client:
    """Flyte v1's Redis resource manager, as flyte-upstream.md section 1.4 describes it."""

    def __init__(self, url: str, key: str, quota: int, poll: float) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.Redis.from_url(url, decode_responses=True)
        self._key, self._quota, self._poll = key, quota, poll
        self._project_prefix = "ex:bench"
        self._project_limit = quota

    async def allocate(self, token: str) -> bool:
        token = f"{self._project_prefix}:dev:{token}"
        if await self._redis.sismember(self._key, token):
            return True
        size = await self._redis.scard(self._key)
        if not self._quota > size:
            return False
        count = 0
        for member in await self._redis.smembers(self._key):
            if str(member).startswith(self._project_prefix):
                count += 1
            if not self._project_limit > count:  # upstream tests after every member
                return False
        await self._redis.sadd(self._key, token)
        return True

    async def release(self, token: str) -> None:
        await self._redis.srem(self._key, f"{self._project_prefix}:dev:{token}")

    async def wait_for_room(self) -> None:
        await asyncio.sleep(self._poll)

    async def close(self) -> None:
        await self._redis.aclose()


Opener = Callable[[int], Awaitable[Client]]


def opener(target: Target, namespace: str, quota: int, poll: float) -> Opener:
    async def open_client(index: int) -> Client:
        if target.backend == "flyte_v1_redis":
            key = f"{target.key_prefix}:{namespace}"
            return FlyteV1Client(target.url, key, quota, poll)
        return await SluiceClient.open(target, namespace, quota, index)

    return open_client


# Throughput and over-allocation.
async def cycle(client: Client, index: int, seconds: float, hold: float) -> list[Interval]:
    """Allocate, hold, release until `seconds` pass; returns (granted, releasing) moments."""
    intervals: list[Interval] = []
    deadline = time.monotonic() + seconds
    count = 0
    while time.monotonic() < deadline:
        token = f"c{index}-{count}"
        while not await client.allocate(token):
            if time.monotonic() >= deadline:
                await client.release(token)  # stop waiting
                return intervals
            await client.wait_for_room()
        granted = time.monotonic_ns()
        if hold:
            await asyncio.sleep(hold)
        intervals.append((granted, time.monotonic_ns()))
        await client.release(token)
        count += 1
    return intervals


def cycle_process(
    target: Target, quota: int, poll: float, index: int, seconds: float, hold: float,
    barrier: Any, results: Any,
) -> None:  # fmt: skip
    """A contending client in its own process; puts ("ok", intervals) or ("error", text)."""

    async def run() -> list[Interval]:
        client = await opener(target, NAMESPACE, quota, poll)(index)
        try:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
            return await cycle(client, index, seconds, hold)
        finally:
            await client.close()

    try:
        results.put(("ok", asyncio.run(run())))
    except BaseException as exc:
        barrier.abort()
        results.put(("error", f"client {index}: {exc!r}"))


def contend(
    target: Target, clients: int, quota: int, poll: float, seconds: float, hold: float
) -> list[list[Interval]]:
    """`clients` processes (tasks of this process for memory://) cycling at once."""
    if target.backend == "memory":
        return asyncio.run(contend_in_process(target, clients, quota, seconds, hold))
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(clients), context.Queue()
    processes = [
        context.Process(
            target=cycle_process,
            args=(target, quota, poll, index, seconds, hold, barrier, results),
        )
        for index in range(clients)
    ]
    return run_all(processes, results, 120 + seconds)


def run_all(
    processes: Sequence[Any],
    results: Any,
    timeout: float,
    started: Callable[[], None] | None = None,
) -> list[Any]:
    """Start the processes, call `started`, and gather each one's ("ok", payload); any
    ("error", text) raises. Every process is joined, or killed, before this returns."""
    for process in processes:
        process.start()
    if started is not None:
        started()
    try:
        answers = [results.get(timeout=timeout) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    errors = [text for kind, text in answers if kind == "error"]
    if errors:
        raise RuntimeError("; ".join(errors))
    return [payload for _, payload in answers]


async def contend_in_process(
    target: Target, clients: int, quota: int, seconds: float, hold: float
) -> list[list[Interval]]:
    first = await SluiceClient.open(target, NAMESPACE, quota, 0)
    try:
        everyone = [first] + [SluiceClient.sharing(first, index) for index in range(1, clients)]
        runs = [cycle(client, index, seconds, hold) for index, client in enumerate(everyone)]
        return list(await asyncio.gather(*runs))
    finally:
        await first.close()


def over_allocations(logs: Sequence[Sequence[Interval]], quota: int) -> tuple[int, int]:
    """Grants that made the holders more than `quota`, and the most holders seen at once."""
    moments = sorted(
        [(released, 0) for log in logs for _, released in log]
        + [(granted, 1) for log in logs for granted, _ in log]
    )  # at one instant, releases count first
    holders = most = over = 0
    for _, is_grant in moments:
        holders += 1 if is_grant else -1
        if is_grant and holders > quota:
            over += 1
        most = max(most, holders)
    return over, most


# Hand-off latency.
@dataclass
class Turns:
    """How the two sides of a hand-off tell each other "I am waiting"."""

    send: Callable[[], Awaitable[None]]
    receive: Callable[[], Awaitable[None]]


async def take_turns(
    client: Client, side: int, rounds: int, turns: Turns
) -> list[tuple[int, str, int]]:
    """Side 0 starts holding "h0" (see `hold_first`). In round r the holder waits until the
    other side's claim was refused, then releases; the other side is granted on its wake-up,
    says so, and holds next. Returns (round, "released" | "granted", monotonic ns)."""
    marks: list[tuple[int, str, int]] = []
    for round_ in range(rounds):
        if round_ % 2 == side:  # holding
            await turns.receive()
            marks.append((round_, "released", time.monotonic_ns()))
            await client.release(f"h{round_}")
            await turns.receive()  # granted over there: only now may this side ask again
        else:
            token = f"h{round_ + 1}"
            if await client.allocate(token):
                raise RuntimeError(f"round {round_}: granted while the other side held")
            await turns.send()
            while True:
                await client.wait_for_room()
                if await client.allocate(token):
                    marks.append((round_, "granted", time.monotonic_ns()))
                    break
            await turns.send()
    if rounds % 2 == side:
        await client.release(f"h{rounds}")
    return marks


async def hold_first(client: Client) -> None:
    """Side 0 holds the quota before side 1 is told to start."""
    if not await client.allocate("h0"):
        raise RuntimeError("the hand-off quota is not free at the start")


def handoff_process(
    target: Target, poll: float, side: int, rounds: int, connection: Any, results: Any
) -> None:
    async def run() -> list[tuple[int, str, int]]:
        client = await opener(target, HANDOFF, 1, poll)(side)
        loop = asyncio.get_running_loop()

        async def send() -> None:
            connection.send("turn")

        async def receive() -> None:
            await loop.run_in_executor(None, connection.recv)

        try:
            if side == 0:
                await hold_first(client)
            connection.send("ready")
            await loop.run_in_executor(None, connection.recv)
            return await take_turns(client, side, rounds, Turns(send, receive))
        finally:
            await client.close()

    try:
        results.put(("ok", asyncio.run(run())))
    except BaseException as exc:
        results.put(("error", f"side {side}: {exc!r}"))
        connection.close()


def handoffs(target: Target, rounds: int, poll: float) -> list[float]:
    """Milliseconds from each release to the waiting side's grant."""
    if target.backend == "memory":
        marks = asyncio.run(handoffs_in_process(target, rounds))
    else:
        context = multiprocessing.get_context("spawn")
        ends, results = context.Pipe(), context.Queue()
        processes = [
            context.Process(
                target=handoff_process, args=(target, poll, side, rounds, ends[side], results)
            )
            for side in (0, 1)
        ]

        def close_ends() -> None:
            for end in ends:
                end.close()  # so that a side sees EOF if the other one dies

        answers = run_all(processes, results, 300, close_ends)
        marks = [mark for side_marks in answers for mark in side_marks]
    return latencies_of(marks)


def latencies_of(marks: Sequence[tuple[int, str, int]]) -> list[float]:
    """Milliseconds from each round's release to its grant."""
    released = {r: ns for r, kind, ns in marks if kind == "released"}
    granted = {r: ns for r, kind, ns in marks if kind == "granted"}
    return [(granted[r] - released[r]) / 1e6 for r in sorted(released)]


async def handoffs_in_process(target: Target, rounds: int) -> list[tuple[int, str, int]]:
    first = await SluiceClient.open(target, HANDOFF, 1, 0)
    second = SluiceClient.sharing(first, 1)
    inboxes = [asyncio.Queue[None](), asyncio.Queue[None]()]

    def turns(side: int) -> Turns:
        async def send() -> None:
            inboxes[1 - side].put_nowait(None)

        return Turns(send, inboxes[side].get)

    try:
        await hold_first(first)
        marks = await asyncio.gather(
            take_turns(first, 0, rounds, turns(0)), take_turns(second, 1, rounds, turns(1))
        )
    finally:
        await first.close()
    return marks[0] + marks[1]


# Figures.
def percentiles(samples: Sequence[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {
        "p50": round(cuts[49], 2),
        "p99": round(cuts[98], 2),
        "max": round(max(samples), 2),
        "samples": len(samples),
    }


def one_client_rate(target: Target, poll: float, seconds: float) -> float:
    async def run() -> float:
        client = await opener(target, NAMESPACE, 1000, poll)(0)
        try:
            return len(await cycle(client, 0, seconds, 0.0)) / seconds
        finally:
            await client.close()

    return asyncio.run(run())


def measure(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    single = one_client_rate(target, args.reference_poll, args.seconds)
    logs = contend(
        target, args.clients, args.quota, args.reference_poll, args.seconds, args.hold_ms / 1000
    )
    over, most = over_allocations(logs, args.quota)
    latencies = handoffs(target, args.handoffs, args.reference_poll)
    line: dict[str, Any] = {
        "bench": "resources",
        "backend": target.backend,
        "pairs_per_s_1_client": round(single, 1),
        f"pairs_per_s_{args.clients}_clients": round(sum(map(len, logs)) / args.seconds, 1),
        "clients": args.clients,
        "quota": args.quota,
        "hold_ms": args.hold_ms,
        "over_allocations": over,
        "most_holders_seen": most,
        "handoff_ms": percentiles(latencies),
    }
    if target.backend in ("sqlite", "postgresql", "redis"):
        local = asyncio.run(handoffs_in_process(target, args.handoffs))
        line["handoff_in_process_ms"] = percentiles(latencies_of(local))
        line["pairs_vs_limit"] = limit_ratio(target, args.seconds)
    return line


# Servers.
def reachable(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
        return True
    return False


@contextlib.contextmanager
def postgres_database() -> Any:
    import psycopg

    name = f"sluice_bench_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        asyncio.run(upgrade(url))
        yield url
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def upgrade(url: str) -> None:
    db = await Database.open(url, upgrade=True)
    await db.close()


def delete_redis_keys(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    prefix = f"sluice-bench-{os.getpid()}-{secrets.token_hex(4)}"
    if backend == "memory":
        return measure(Target("memory", "memory://"), args)
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'bench.db'}"
            asyncio.run(upgrade(url))
            return measure(Target("sqlite", url), args)
    if backend == "postgresql":
        if not reachable("127.0.0.1", 5432):
            return {"bench": "resources", "backend": backend, "skipped": "127.0.0.1:5432 down"}
        with postgres_database() as url:
            return measure(Target("postgresql", url), args)
    if not reachable("127.0.0.1", 6379):
        return {"bench": "resources", "backend": backend, "skipped": "127.0.0.1:6379 down"}
    try:
        return measure(Target(backend, REDIS_URL, prefix), args)
    finally:
        delete_redis_keys(prefix)


def limit_ratio(target: Target, seconds: float) -> dict[str, Any]:
    """Our allocate + release pairs from one client against the store's bare limit
    (`store_limits.py`: a CAS UPDATE + commit on SQLite, a one-statement upsert on
    PostgreSQL, two PINGs on Redis), in alternating rounds in one process. On Redis also two
    no-op scripts carrying an allocate's and a release's arguments (`noop_scripts_ratio`: how
    close to the PINGs one script per operation can get before it does any work)."""

    async def run() -> dict[str, Any]:
        limit: Any
        if target.backend == "sqlite":
            limit = store_limits.SqliteCas()
        elif target.backend == "postgresql":
            limit = store_limits.PostgresUpsert(target.url)
        else:
            limit = store_limits.RedisTwoPings(REDIS_URL)
        await limit.open()
        ours = await opener(target, NAMESPACE, 1000, 0.0)(0)
        count = 0

        async def pair() -> None:
            nonlocal count
            count += 1
            if not await ours.allocate(f"r-{count}"):
                raise RuntimeError("an uncontended claim was refused")
            await ours.release(f"r-{count}")

        steps: dict[str, store_limits.Step] = {"ours": pair, limit.name: limit.step}
        redis = None
        try:
            if target.backend == "redis":
                redis, steps["noop_scripts"] = await noop_scripts(target)
            rates = await store_limits.alternate(steps, seconds)
        finally:
            await ours.close()
            await limit.close()
            if redis is not None:
                await redis.aclose()
        line = store_limits.ratio_line(rates, "ours", limit.name)
        if "noop_scripts" in rates:
            line["noop_scripts_ratio"] = round(rates["noop_scripts"] / rates[limit.name], 3)
        return line

    return asyncio.run(run())


async def noop_scripts(target: Target) -> tuple[Any, store_limits.Step]:
    """A client and a step running two no-op scripts with an allocate's and a release's
    arguments."""
    import redis.asyncio as aioredis

    redis = aioredis.Redis.from_url(REDIS_URL)
    sha = await redis.script_load("return 1")
    now, origin = repr(time.time()), secrets.token_hex(16)
    base = f"{target.key_prefix}:{{resources}}"
    allocate = [base, now, now, "c0-1", origin, "bench", "dev", "x0", "n", "0"]
    allocate += [NAMESPACE, "1", "", "1000", ""]  # namespace, units, default, caps
    release = [base, "c0-1", origin, now, NAMESPACE]

    async def step() -> None:
        await redis.evalsha(sha, 0, *allocate)
        await redis.evalsha(sha, 0, *release)

    return redis, step


BACKENDS = ("memory", "sqlite", "postgresql", "redis", "flyte_v1_redis")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--quota", type=int, default=8, help="quota the clients contend for")
    parser.add_argument("--hold-ms", type=float, default=1.0, help="how long a grant is held")
    parser.add_argument("--handoffs", type=int, default=300, help="hand-offs timed")
    parser.add_argument("--reference-poll", type=float, default=0.01, help="seconds")
    parser.add_argument("--quick", action="store_true", help="1 s figures, 60 hand-offs")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.handoffs = 1.0, 60
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    for backend in args.backends:
        print(json.dumps(run_backend(backend, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
