"""The fault-injection harness: engine processes (engine_proc.py) started, SIGKILLed,
paused (SIGSTOP/SIGCONT, alone or with their workers) and restarted, every death and pause
timed, and the store read back for the history checker.

Each engine is the leader of a process group of its own (a new session): its worker processes
share the group, so `os.killpg` freezes the engine with its workers, as a paused machine or
container is frozen, while `os.kill` freezes the engine alone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from faults.history import (
    Report,
    Window,
    build_bodies,
    check_history,
    check_store,
    read_history,
)
from faults.hosts import Host
from sluice.config import Settings, load_config
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
ENGINE_PROC = HERE / "engine_proc.py"
QUOTAS = {"faults-q": 1, "faults-pair": 2}
HEARTBEAT = 1.0  # cache reservation heartbeat; a reservation expires 3 heartbeats after
EXPIRY = 3 * HEARTBEAT
LAPSE_AFTER = EXPIRY - HEARTBEAT - 0.5  # a reservation may have lapsed this long after a death
LEFTOVERS = {
    "token holders": "SELECT count(*) FROM resource_holders",
    "units in use": "SELECT sum(in_use) FROM resource_usage",
    "cache reservations": "SELECT count(*) FROM cache_reservations",
}


def config(**sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings sections of the fault tests: fast retries, short leases (token 1.5 s,
    reservation 3 s), quotas 1 and 2; `sections` override keys."""
    base: dict[str, dict[str, Any]] = {
        "engine": {
            "workers": 2,
            "backoff_base": 0.05,
            "backoff_max": 0.2,
            "resync_interval": 1.0,
            "execution_lease": 3.0,
            "max_system_failures": 3,
        },
        "resources": {"quotas": dict(QUOTAS), "lease": 1.5},
        "cache": {"heartbeat_interval": HEARTBEAT, "max_reservation_heartbeat": HEARTBEAT},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return base


def settings(url: str, **sections: dict[str, Any]) -> Settings:
    return load_config(database_url=url, **config(**sections))


def workload() -> Any:
    return load_module("faults_workload", str(WORKLOAD))


class Engines:
    """Engine processes, each one's death time (wall clock, as the bodies' records) kept by
    pid. A process killed by its own crash hook is timed by a thread waiting for it."""

    def __init__(self, url: str, logs: Path, cfg: dict[str, dict[str, Any]]) -> None:
        self.url, self.logs, self.cfg = url, logs, cfg
        self.procs: list[subprocess.Popen[str]] = []
        self.deaths: dict[int, float] = {}
        self.hosts: dict[int, Host] = {}
        self.instances: dict[int, str] = {}  # its engine id in the store, by pid
        self.windows: list[Window] = []  # pauses: [SIGSTOP sent, SIGCONT sent] by pid
        self._paused: dict[int, Window] = {}
        self.kills = 0
        self._lock = threading.Lock()

    def start(self, crash: str | None = None, host: Host | None = None) -> subprocess.Popen[str]:
        """Start an engine and wait until it drives executions. Blocking: an async test calls
        it through asyncio.to_thread, never on its event loop (its runtime may be inside a
        SQLite write transaction that the new engine's open then waits for)."""
        proc = self._spawn(crash, host or Host())
        if not self.wait_ready(proc):
            log = (self.logs / f"engine-{len(self.procs) - 1}.log").read_text()
            raise AssertionError(f"engine {proc.pid} did not start:\n{log[-3000:]}")
        return proc

    def _spawn(self, crash: str | None, host: Host) -> subprocess.Popen[str]:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = (self.logs / f"engine-{len(self.procs)}.log").open("w")
        url, cfg = host.store_url or self.url, host.config(self.cfg)
        proc = subprocess.Popen(
            host.argv(
                [sys.executable, str(ENGINE_PROC), url, json.dumps(cfg)]
                + ([crash] if crash else [])
            ),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=host.environ(os.environ),
            cwd=self.logs,  # a PostgreSQL engine keeps task logs under ./.sluice
            start_new_session=True,  # its own process group, with its workers
        )
        log.close()
        self.procs.append(proc)
        self.hosts[proc.pid] = host
        threading.Thread(target=self._reap, args=(proc,), daemon=True).start()
        return proc

    def wait_ready(self, proc: subprocess.Popen[str], within: float = 60) -> bool:
        """True once it says "ready"; False if it exited first. Fails (with its log) when it
        neither starts nor exits in `within` seconds."""
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], within)
        if not readable:
            proc.kill()
            proc.wait(30)
            log = (self.logs / f"engine-{self.procs.index(proc)}.log").read_text()
            raise AssertionError(f"engine {proc.pid} hung at start:\n{log[-3000:]}")
        line = proc.stdout.readline()
        if line.startswith("ready"):
            self.instances[proc.pid] = line.split()[1]
            return True
        proc.wait(30)
        return False

    def _reap(self, proc: subprocess.Popen[str]) -> None:
        proc.wait()
        with self._lock:
            self.deaths.setdefault(proc.pid, time.time())

    def kill(self, proc: subprocess.Popen[str]) -> None:
        """SIGKILL, then wait until it is gone (its bodies die with it, even stopped ones)."""
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        with self._lock:
            self.deaths.setdefault(proc.pid, time.time())
        self.kills += 1
        window = self._paused.pop(proc.pid, None)
        if window is not None:
            window.end = self.deaths[proc.pid]
            self.windows.append(window)

    async def crashed(self, proc: subprocess.Popen[str], within: float = 60) -> None:
        """Wait for `proc` to kill itself at its crash point."""
        code = await asyncio.to_thread(proc.wait, within)
        assert code == -signal.SIGKILL, f"engine {proc.pid} exited {code}, not by its hook"
        self.kills += 1
        with self._lock:
            self.deaths.setdefault(proc.pid, time.time())

    def killed_pids(self) -> dict[int, float]:
        """Deaths by SIGKILL only (an engine stopped with SIGTERM let its bodies end)."""
        return {
            p.pid: self.deaths[p.pid]
            for p in self.procs
            if p.returncode == -signal.SIGKILL and p.pid in self.deaths
        }

    def pause(self, proc: subprocess.Popen[str], with_workers: bool) -> None:
        """SIGSTOP the engine alone (its workers run on) or its whole process group."""
        if with_workers:
            os.killpg(proc.pid, signal.SIGSTOP)
        else:
            proc.send_signal(signal.SIGSTOP)
        kind = "pause with workers" if with_workers else "pause"
        self._paused[proc.pid] = Window(kind, frozenset({proc.pid}), time.time())

    def resume(self, proc: subprocess.Popen[str]) -> None:
        window = self._paused.pop(proc.pid)
        window.end = time.time()
        self.windows.append(window)
        if window.kind == "pause with workers":
            os.killpg(proc.pid, signal.SIGCONT)
        else:
            proc.send_signal(signal.SIGCONT)

    def paused(self, proc: subprocess.Popen[str]) -> bool:
        return proc.pid in self._paused

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None and proc.pid in self._paused:
                self.resume(proc)  # a stopped process cannot act on SIGTERM
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # a worker its engine left behind

    def live(self) -> list[subprocess.Popen[str]]:
        return [p for p in self.procs if p.poll() is None]


@contextlib.asynccontextmanager
async def runtime(url: str, cfg: dict[str, dict[str, Any]]) -> AsyncIterator[Runtime]:
    """The test's own runtime: creates the schema, launches, reads the store back."""
    from faults.probe import ENTRY

    rt = await Runtime.open(load_config(database_url=url, **cfg), upgrade=True)
    try:
        await rt.load_plugins(extra=[ENTRY])
        yield rt
    finally:
        await rt.close()


async def records(rt: Runtime, ids: Iterable[str]) -> dict[str, ExecutionRecord]:
    async with rt.store.read() as repos:
        found = await repos.executions.find(ids=list(ids), limit=None)
    return {r.id: r for r in found}


async def wait_terminal(
    rt: Runtime, ids: Iterable[str], within: float = 90
) -> dict[str, ExecutionRecord]:
    """Poll until every execution is terminal; a hang guard, not a timing assertion."""
    wanted = list(ids)
    deadline = time.monotonic() + within
    while True:
        found = await records(rt, wanted)
        if len(found) == len(wanted) and all(r.phase.is_terminal for r in found.values()):
            return found
        assert time.monotonic() < deadline, {i: r.phase.value for i, r in found.items()}
        await asyncio.sleep(0.1)


async def wait_for(condition: Any, within: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what} not met in time"
        await asyncio.sleep(0.02)


async def store_view(
    rt: Runtime, ids: Iterable[str]
) -> tuple[dict[str, list[NodeRecord]], list[EventRecord], dict[str, int]]:
    """Nodes by execution, every event, and the rows left in the holder/reservation tables."""
    async with rt.store.read() as repos:
        nodes = {i: await repos.nodes.list(i) for i in ids}
        events = await repos.events.list()
        left = {}
        for name, sql in LEFTOVERS.items():
            left[name] = int((await repos.conn.execute(sa.text(sql))).scalar_one() or 0)
    return nodes, events, left


async def verdict(
    rt: Runtime, engines: Engines, history: Path, ids: list[str], *, within: float = 90
) -> Report:
    """Wait for every execution to end, stop the engines, and check the whole history."""
    final = await wait_terminal(rt, ids, within)
    await asyncio.to_thread(engines.stop_all)
    report = Report()
    bodies = build_bodies(read_history(history), engines.killed_pids(), report)
    nodes, events, left = await store_view(rt, ids)
    checked = check_history(bodies, QUOTAS, events, lapse_after=LAPSE_AFTER)
    checked.violations[:0] = report.violations
    check_store(checked, bodies, final, nodes, events, left)
    return checked


async def node_phase(rt: Runtime, execution_id: str, node_id: str) -> int | None:
    async with rt.store.read() as repos:
        for node in await repos.nodes.list(execution_id):
            if node.node_id == node_id:
                return node.task_phase
    return None


async def wait_node_phase(
    rt: Runtime, execution_id: str, node_id: str, phase: int, within: float = 60
) -> None:
    deadline = time.monotonic() + within
    while await node_phase(rt, execution_id, node_id) != phase:
        assert time.monotonic() < deadline, f"{execution_id}/{node_id} never reached {phase}"
        await asyncio.sleep(0.05)


def starts(history: Path, execution_id: str | None = None) -> list[dict[str, object]]:
    return [
        line
        for line in read_history(history)
        if line["ev"] == "start" and execution_id in (None, line["ex"])
    ]


async def lapsed_leases(rt: Runtime) -> bool:
    """Every token held in the resource store has a lease that has run out."""
    async with rt.store.read() as repos:
        query = sa.text("SELECT lease_expires_at FROM resource_holders")
        rows = (await repos.conn.execute(query)).all()
    return bool(rows) and all(float(r[0]) < time.time() for r in rows)
