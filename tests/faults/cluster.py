"""Engines over one store, each in a slot that keeps its host across restarts (hostname,
network namespace and proxies, clock skew), the nemeses that act on them, and the verdict.

Every nemesis records the window it acted in (history.Window): the checker needs them to tell
a re-run caused by a fault (the engine could not save an outcome while it was frozen or cut
off) from one that is a violation. Times are the test's wall clock.

    async with Cluster(url, tmp_path, cfg, hostnames=True, netns=True) as cluster:
        a, b = await cluster.add(), await cluster.add(skew=90)
        await cluster.pause(a, 6.0, with_workers=False)
        report = await cluster.verdict(rt, ids)
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from faults.harness import LAPSE_AFTER, QUOTAS, Engines, records, store_view
from faults.history import Report, Window, build_bodies, check_history, check_store, read_history
from faults.hosts import Host
from faults.monitor import PidMonitor
from faults.network import NetHost, Network
from sluice.runtime import Runtime
from sluice.store.records import EventRecord


@dataclass
class Slot:
    index: int
    proc: subprocess.Popen[str] | None = None
    net: NetHost | None = None
    skew: int = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


def _server(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return (parts.hostname or "127.0.0.1", parts.port or 0)


class Cluster:
    def __init__(
        self,
        url: str,
        tmp_path: Path,
        cfg: dict[str, dict[str, Any]],
        *,
        hostnames: bool = False,
        netns: bool = False,
    ) -> None:
        self.url, self.cfg = url, cfg
        self.history = tmp_path / "history.jsonl"
        self.engines = Engines(url, tmp_path / "logs", cfg)
        self.hostnames = hostnames
        self.network = Network() if netns else None
        self.monitor = PidMonitor(self.history)
        self.faults: list[Window] = []  # cuts, slowness, store outages (pauses: engines')
        self.slots: list[Slot] = []
        self.events: list[EventRecord] = []
        resources = cfg.get("resources", {}).get("url")
        self._servers = [_server(url)] + ([_server(resources)] if resources else [])
        self._resources = resources

    async def __aenter__(self) -> Cluster:
        self.monitor.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        try:
            await asyncio.to_thread(self.engines.stop_all)
        finally:
            self.monitor.stop()
            if self.network is not None:
                self.network.close()

    # Engines.

    def host(self, slot: Slot) -> Host:
        net = slot.net
        return Host(
            name=f"nemesis-{slot.index}" if self.hostnames else None,
            netns=net.netns if net else None,
            skew=slot.skew,
            store_url=net.url(self.url) if net else None,
            resources_url=net.url(self._resources) if net and self._resources else None,
        )

    async def add(self, skew: int = 0) -> Slot:
        slot = Slot(len(self.slots), skew=skew)
        if self.network is not None:
            slot.net = self.network.add(self._servers)
        self.slots.append(slot)
        await self.restart(slot)
        return slot

    async def restart(self, slot: Slot, skew: int | None = None) -> None:
        if skew is not None:
            slot.skew = skew
        slot.proc = await asyncio.to_thread(self.engines.start, None, self.host(slot))

    def live(self) -> list[Slot]:
        return [s for s in self.slots if s.proc is not None and s.proc.poll() is None]

    def slot_of(self, engine_pid: int) -> Slot | None:
        return next((s for s in self.slots if s.proc is not None and s.pid == engine_pid), None)

    # Nemeses: each waits out its fault and records its window.

    async def kill(self, slot: Slot) -> None:
        assert slot.proc is not None
        await asyncio.to_thread(self.engines.kill, slot.proc)

    async def pause(
        self, slot: Slot, seconds: float, *, with_workers: bool, unlocked: bool = False
    ) -> None:
        """Freeze an engine (and its workers) for `seconds`. `unlocked`: on SQLite, freeze it
        outside a write transaction (a frozen writer holds the file's lock, and nobody else
        can write until it thaws): try again a moment later while it holds the lock."""
        assert slot.proc is not None
        self.engines.pause(slot.proc, with_workers)
        for _ in range(50):
            if not unlocked or not await asyncio.to_thread(self._write_locked):
                break
            self.engines.resume(slot.proc)
            self.engines.windows.pop()  # not a pause: a false start
            await asyncio.sleep(0.05)
            self.engines.pause(slot.proc, with_workers)
        await asyncio.sleep(seconds)
        if slot.proc.poll() is None and self.engines.paused(slot.proc):
            self.engines.resume(slot.proc)

    def _write_locked(self) -> bool:
        """Someone holds the SQLite file's write lock (for more than 0.3 s)."""
        if not self.url.startswith("sqlite"):
            return False
        path = urlsplit(self.url).path
        conn = sqlite3.connect(path, timeout=0.3, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()

    async def cut(self, slot: Slot, seconds: float, *, link: bool = False) -> None:
        """Cut one engine off its stores: the proxies blackhole, or its link goes down."""
        net = self._net(slot)
        window = self._open("cut", slot)
        try:
            net.link(False) if link else net.cut()
            await asyncio.sleep(seconds)
        finally:
            net.link(True) if link else net.heal()
            window.end = time.time()

    async def slow(self, slot: Slot, seconds: float, delay: float) -> None:
        """Every chunk of one engine's store traffic `delay` late, each way."""
        net = self._net(slot)
        window = self._open("slow", slot)
        try:
            net.delay(delay)
            await asyncio.sleep(seconds)
        finally:
            net.delay(0.0)
            window.end = time.time()

    async def store_outage(self, seconds: float, *, reset: bool) -> None:
        """The stores go away for every engine: a cut (blackhole) or a restart (connections
        reset, new ones refused), through the proxies only."""
        assert self.network is not None
        window = self._open("store restart" if reset else "store cut", None)
        try:
            for net in self.network.hosts:
                net.reset() if reset else net.cut()
            await asyncio.sleep(seconds)
        finally:
            for net in self.network.hosts:
                net.heal()
            window.end = time.time()

    def _net(self, slot: Slot) -> NetHost:
        assert slot.net is not None, "a network nemesis needs the engines in namespaces"
        return slot.net

    def _open(self, kind: str, slot: Slot | None) -> Window:
        pids = None if slot is None else frozenset({slot.pid})
        window = Window(kind, pids, time.time())
        self.faults.append(window)
        return window

    def windows(self) -> list[Window]:
        return self.engines.windows + self.faults

    # The verdict.

    async def settle(self, rt: Runtime, ids: list[str], within: float) -> None:
        """Wait (a hang guard) until every execution is terminal; what is not by then is
        reported by the checker, with everything else."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = await records(rt, ids)
            if len(found) == len(ids) and all(r.phase.is_terminal for r in found.values()):
                return
            await asyncio.sleep(0.2)

    async def verdict(self, rt: Runtime, ids: list[str], *, within: float = 120) -> Report:
        await self.settle(rt, ids, within)
        final = await records(rt, ids)
        await asyncio.to_thread(self.engines.stop_all)
        self.monitor.stop()
        early = Report()
        lines = read_history(self.history)
        bodies = build_bodies(lines, self.engines.killed_pids(), early, self.monitor)
        nodes, self.events, left = await store_view(rt, ids)
        lag = max([0, *(-h.skew for h in self.engines.hosts.values())])
        report = check_history(
            bodies,
            QUOTAS,
            self.events,
            lapse_after=LAPSE_AFTER,
            windows=self.windows(),
            event_lag=lag,
        )
        report.violations[:0] = early.violations
        check_store(report, bodies, final, nodes, self.events, left)
        report.violations += [f"execution {i} not in the store" for i in set(ids) - set(final)]
        return report
