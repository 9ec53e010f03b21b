"""The deterministic nemesis scenarios, for the tests (test_nemeses.py) and the bench
(bench/nemesis.py): two engines over one store drive 8 executions of the mixed workload
(nemesis_workload.py); the quota-1 task of the first execution runs while a file exists, so
that a body is surely live on its engine (the victim) when the fault comes. The fault acts,
the file goes, and the history checker judges everything that happened. The engine with the
slowest clock starts first and takes every execution; the other starts once the first body
runs.

Names: `pause` (the victim's engine alone SIGSTOPped, its workers run on), `pause-workers`
(engine and workers frozen, as a whole machine), `skew+90` / `skew-90` (the second engine's
clock ahead or behind, each engine its own hostname), `partition` (the victim's link down),
`slow` (every chunk of the victim's store traffic 1 s late each way); each fault lasts 6 s,
longer than every lease (tokens 3 s, executions 4.5 s, reservations 3 s). Controls, which
must pass on any code: `pause-short` and `partition-short` (0.5 s, shorter than the leases)
and `skew0` (hostnames and namespaces, no skew).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faults.cluster import Cluster, Slot
from faults.harness import config, records, runtime
from faults.history import Report, read_history
from sluice.modules import load_module
from sluice.runtime import Runtime

WORKLOAD = Path(__file__).resolve().parent / "nemesis_workload.py"
EXECUTIONS = 8
FAULT = 6.0  # seconds: past every lease
SHORT = 0.5  # seconds: within every lease
DELAY = 1.0  # seconds each chunk of a slowed engine's traffic waits, each way


def flows() -> Any:
    return load_module("nemesis_workload", str(WORKLOAD))


def nemesis_config(resources: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The fault tests' settings with leases long enough that a loaded 2-core machine does
    not let them lapse by itself (tokens 3 s, executions 4.5 s, reservations 3 s) and 3 pool
    workers; `resources`: a token backend other than the store. The parallelism stays large:
    a reservation's owner queued for a parallelism slot is not heartbeated, and one that
    waits longer than the reservation's expiry loses it and still runs (DESIGN.md section 6:
    "a task that loses its reservation keeps being driven to its end")."""
    return config(
        engine={"workers": 3, "execution_lease": 4.5},
        resources={"lease": 3.0, **(resources or {})},
    )


Act = Callable[[Cluster, Slot], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    act: Act
    skews: tuple[int, ...] = (0, 0)
    hostnames: bool = False
    netns: bool = False
    takeover: bool = True  # a fault on the victim at a known instant


async def _idle(cluster: Cluster, victim: Slot) -> None:
    await asyncio.sleep(FAULT)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("pause", lambda c, v: c.pause(v, FAULT, with_workers=False, unlocked=True)),
        Scenario("pause-workers", lambda c, v: c.pause(v, FAULT, with_workers=True, unlocked=True)),
        Scenario("pause-short", lambda c, v: c.pause(v, SHORT, with_workers=False, unlocked=True)),
        Scenario("skew+90", _idle, (0, 90), hostnames=True, takeover=False),
        Scenario("skew-90", _idle, (0, -90), hostnames=True, takeover=False),
        Scenario("skew0", _idle, (0, 0), hostnames=True, netns=True, takeover=False),
        Scenario("partition", lambda c, v: c.cut(v, FAULT, link=True), hostnames=True, netns=True),
        Scenario(
            "partition-short", lambda c, v: c.cut(v, SHORT, link=True), hostnames=True, netns=True
        ),
        Scenario("slow", lambda c, v: c.slow(v, FAULT, DELAY), hostnames=True, netns=True),
    )
}


@dataclass
class Outcome:
    scenario: str
    backend: str
    report: Report
    takeover: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def figures(self) -> dict[str, Any]:
        return {
            "nemesis": self.scenario,
            "backend": self.backend,
            **self.report.figures(),
            "takeover": self.takeover,
            "seconds": round(self.seconds, 1),
        }


async def launch(rt: Runtime, history: Path, count: int, hold: Path | None) -> list[str]:
    """`count` executions of the mixed workload, two per cached key; the first one's quota-1
    task holds while `hold` exists."""
    wf, ids = flows().mixed, []
    for i in range(count):
        inputs = {
            "history": str(history),
            "tag": i,
            "p": i % 3,
            "cache_seconds": 1.0 + (i // 2) / 10,
            "seconds": 0.5,
            "hold": str(hold) if hold is not None and i == 0 else "",
        }
        ids.append((await rt.launch(wf, inputs)).id)
    return ids


async def victim_of(
    cluster: Cluster, execution_id: str, *, required: bool, within: float = 30
) -> Slot | None:
    """The slot whose engine runs the quota-1 body of `execution_id`. When it never starts
    (a skewed engine alone may never get its tokens), the fault needs no victim unless
    `required`: the checker reports what did not run."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for line in read_history(cluster.history):
            if line["ev"] == "start" and line["ex"] == execution_id and line["node"] == "held":
                slot = cluster.slot_of(int(line["engine"]))  # type: ignore[call-overload]
                if slot is not None:
                    return slot
        await asyncio.sleep(0.05)
    if required:
        raise AssertionError(f"the held body of {execution_id} never started")
    return None


async def owned_by(rt: Runtime, ids: list[str], instance: str) -> list[str]:
    found = await records(rt, ids)
    return [i for i, r in found.items() if r.owner == instance and not r.phase.is_terminal]


async def watch_owners(
    rt: Runtime, owned: list[str], instance: str, stop: asyncio.Event
) -> dict[str, float]:
    """When (test's clock) each execution `instance` owned was first seen owned by another
    engine in the store, polled every 0.1 s until `stop`."""
    taken: dict[str, float] = {}
    while not stop.is_set():
        for ex, record in (await records(rt, owned)).items():
            if ex not in taken and record.owner not in (None, instance):
                taken[ex] = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)
    return taken


def takeover_times(
    taken: dict[str, float], owned: list[str], start: float, lease: float
) -> dict[str, Any]:
    """Seconds from the fault's start to another engine's claim of each execution the victim
    owned, while the fault lasted."""
    firsts = [taken[ex] - start for ex in owned if ex in taken]
    out: dict[str, Any] = {"owned": len(owned), "taken": len(firsts), "lease_s": lease}
    if firsts:
        out |= {
            "first_s": round(min(firsts), 3),
            "median_s": round(statistics.median(firsts), 3),
            "last_s": round(max(firsts), 3),
        }
    return out


async def run(
    name: str, url: str, tmp_path: Path, backend: str, resources: dict[str, str] | None = None
) -> Outcome:
    scenario = SCENARIOS[name]
    cfg = nemesis_config(resources)
    history, hold = tmp_path / "history.jsonl", tmp_path / "hold"
    hold.touch()
    began = time.monotonic()
    async with runtime(url, cfg) as rt:
        cluster = Cluster(url, tmp_path, cfg, hostnames=scenario.hostnames, netns=scenario.netns)
        async with cluster:
            # The slowest clock first: it takes every execution, and the engines started next
            # (ahead of it, or as fast) are the ones a skew would make take them over.
            # It claims the executions as they are launched, long before the others are up.
            first, *others = sorted(scenario.skews)
            await cluster.add(skew=first)
            ids = await launch(rt, history, EXECUTIONS, hold)
            found, *_ = await asyncio.gather(
                victim_of(cluster, ids[0], required=scenario.takeover),
                *(cluster.add(skew=skew) for skew in others),
            )
            victim = found or cluster.slots[0]
            owned = await owned_by(rt, ids, cluster.engines.instances[victim.pid])
            stop = asyncio.Event()
            watch = asyncio.create_task(
                watch_owners(rt, owned, cluster.engines.instances[victim.pid], stop)
            )
            start = time.time()
            await scenario.act(cluster, victim)
            stop.set()
            taken = await watch
            await asyncio.sleep(0.5)
            hold.unlink()
            report = await cluster.verdict(rt, ids, within=90)
    lease = float(cfg["engine"]["execution_lease"])
    outcome = Outcome(name, backend, report, seconds=time.monotonic() - began)
    if scenario.takeover:
        outcome.takeover = takeover_times(taken, owned, start, lease)
    return outcome


def show(outcome: Outcome) -> None:
    """What a run did (pytest -s shows it)."""
    print(f"\n{outcome.scenario} on {outcome.backend}: {outcome.report.summary()}")
    print(f"  peaks={outcome.report.peaks} takeover={outcome.takeover}")
    for violation in outcome.report.violations[:40]:
        print("  violation:", violation)
    if len(outcome.report.violations) > 40:
        print(f"  ... and {len(outcome.report.violations) - 40} more")
