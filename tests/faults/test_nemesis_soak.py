"""The randomized nemesis soak: engines drive the mixed workload (nemesis_workload.py: retries,
quotas of 1 and 2, a serializable cached task shared by the executions of a wave, lock-keyed
tasks) while faults composed at random act on them, one or two at a time on different
engines: SIGKILL and restart (at once or after the leases lapsed), pause of an engine alone or
with its workers (shorter or longer than the leases); on PostgreSQL, with each engine a host
of its own (hostname, network namespace, proxies), also a partition (the proxies blackhole,
or the link goes down), slow store traffic, a store cut or restart for every engine, and
clock skew (an engine restarted after a kill comes back with its clock 5 to 120 s ahead or
behind, half the time). The history checker (history.py) then judges what the bodies and
their worker processes really did, the store's events and the tables left.

CI runs about 20 s of faults per backend (about 40-50 s with the start, the last fault,
the drain and the checks); SLUICE_SOAK_SECONDS=600 soaks longer, and SLUICE_SOAK_SEED
replays a run's random choices (not its timing). The faults applied and the counts are
printed (run with -s).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from faults.cluster import Cluster, Slot
from faults.harness import records, runtime
from faults.hosts import require_faketime
from faults.network import require_namespaces
from faults.scenarios import flows, nemesis_config
from sluice.runtime import Runtime

SECONDS = float(os.environ.get("SLUICE_SOAK_SECONDS", "20"))
MAX_ACTIVE = 6  # executions in flight at once; more only queue behind the quota of 1
LONG = (5.0, 9.0)  # past every lease (tokens 3 s, executions 4.5 s, reservations 3 s)
SHORT = (0.2, 1.0)

Nemesis = Callable[[Cluster, Slot, random.Random], Awaitable[str]]


def _span(rng: random.Random) -> float:
    return round(rng.uniform(*(LONG if rng.random() < 0.6 else SHORT)), 2)


def _skew(rng: random.Random) -> int:
    return 0 if rng.random() < 0.5 else rng.choice([-1, 1]) * rng.randint(5, 120)


async def kill(cluster: Cluster, slot: Slot, rng: random.Random) -> str:
    await cluster.kill(slot)
    wait = rng.choice([0.0, rng.uniform(0.2, 1.0), rng.uniform(3.5, 6.0)])
    await asyncio.sleep(wait)
    skew = _skew(rng) if cluster.network is not None else 0
    await cluster.restart(slot, skew=skew)
    return f"kill {slot.index}, back after {wait:.1f}s with skew {skew:+d}s"


async def pause(cluster: Cluster, slot: Slot, rng: random.Random) -> str:
    seconds, workers = _span(rng), rng.random() < 0.5
    unlocked = rng.random() < 0.8  # on SQLite, sometimes frozen holding the write lock
    await cluster.pause(slot, seconds, with_workers=workers, unlocked=unlocked)
    return f"pause {slot.index}{' with workers' if workers else ''} {seconds}s"


async def cut(cluster: Cluster, slot: Slot, rng: random.Random) -> str:
    seconds, link = _span(rng), rng.random() < 0.5
    await cluster.cut(slot, seconds, link=link)
    return f"cut {slot.index} ({'link down' if link else 'blackhole'}) {seconds}s"


async def slow(cluster: Cluster, slot: Slot, rng: random.Random) -> str:
    seconds, delay = round(rng.uniform(2.0, 6.0), 2), round(rng.uniform(0.05, 0.4), 2)
    await cluster.slow(slot, seconds, delay)
    return f"slow {slot.index} by {delay}s for {seconds}s"


async def store(cluster: Cluster, slot: Slot, rng: random.Random) -> str:
    seconds, reset = _span(rng), rng.random() < 0.5
    await cluster.store_outage(seconds, reset=reset)
    return f"store {'restart' if reset else 'cut'} {seconds}s"


async def _victims(cluster: Cluster, rt: Runtime, ids: list[str], rng: random.Random) -> list[Slot]:
    """One engine, or two; the first is most often the one that owns the most executions (the
    first engine takes the whole backlog, so a fault on an idle one tests little)."""
    victims = rng.sample(cluster.slots, 2 if rng.random() < 0.3 else 1)
    if rng.random() < 0.7:
        owners = [r.owner for r in (await records(rt, ids)).values() if not r.phase.is_terminal]
        by_instance = {cluster.engines.instances.get(s.pid): s for s in cluster.live()}
        counts = {s.index: owners.count(i) for i, s in by_instance.items() if i}
        if counts:
            busiest = cluster.slots[max(counts, key=lambda k: counts[k])]
            others = [s for s in victims if s is not busiest]
            victims = [busiest, *others[: len(victims) - 1]]
    return victims


async def top_up(rt: Runtime, history: Path, ids: list[str], rng: random.Random) -> None:
    found = await records(rt, ids)
    if sum(not r.phase.is_terminal for r in found.values()) >= MAX_ACTIVE:
        return
    cache_seconds = round(rng.uniform(1.0, 4.5), 3) + len(ids) / 1e6  # a key per wave
    seconds = round(rng.uniform(0.2, 1.0) if rng.random() < 0.8 else rng.uniform(2, 4), 2)
    for _ in range(2):
        inputs = {
            "history": str(history),
            "tag": len(ids),
            "p": rng.randrange(3),
            "cache_seconds": cache_seconds,
            "seconds": seconds,
        }
        ids.append((await rt.launch(flows().mixed, inputs)).id)


async def soak(
    url: str, tmp_path: Path, backend: str, *, hosts: bool, tokens: dict[str, str] | None = None
) -> None:
    seed = int(os.environ.get("SLUICE_SOAK_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    nemeses: list[Nemesis] = [kill, pause] + ([cut, slow, store] if hosts else [])
    cfg = nemesis_config(tokens)
    history, ids, applied = tmp_path / "history.jsonl", list[str](), list[str]()
    async with runtime(url, cfg) as rt:
        cluster = Cluster(url, tmp_path, cfg, hostnames=hosts, netns=hosts)
        async with cluster:
            for i in range(3 if hosts else 2):  # an engine of another host may be skewed
                await cluster.add(skew=_skew(rng) if hosts and i and rng.random() < 0.3 else 0)
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                await top_up(rt, history, ids, rng)
                await asyncio.sleep(rng.uniform(0.3, 2.0))
                victims = await _victims(cluster, rt, ids, rng)
                picks = [rng.choice(nemeses) for _ in victims]
                if store in picks:  # it acts on every engine: alone
                    picks, victims = [store], victims[:1]
                acts = [n(cluster, s, rng) for n, s in zip(picks, victims, strict=True)]
                applied.append(" + ".join(await asyncio.gather(*acts)))
            report = await cluster.verdict(rt, ids, within=240)
    print(f"\nnemesis soak on {backend} (seed {seed}): executions={len(ids)} {report.summary()}")
    for fault in applied:
        print("  fault:", fault)
    for violation in report.violations[:40]:
        print("  violation:", violation)
    assert report.violations == [], report.violations[:10]
    assert applied and ids


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 400)
async def test_nemesis_soak_on_sqlite(sqlite_url: str, tmp_path: Path) -> None:
    await soak(sqlite_url, tmp_path, "sqlite", hosts=False)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(SECONDS + 400)
async def test_nemesis_soak_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    require_namespaces()
    require_faketime()
    await soak(pg_url, tmp_path, "postgresql", hosts=True)
