"""Engines share a backlog: each claims executions in batches bounded by its free capacity
(parallelism minus what it drives), so 3 real `sluice engine` processes on one store each
drive a share of many short executions; after one is SIGKILLed, the live ones finish its
executions (at once: it was a process on this host that no longer exists). A live engine
on this host is never treated as dead: no engine loses an execution it drives."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from support.engine import FLOWS, fast_settings

ROOT = Path(__file__).resolve().parents[2]
BACKLOG, PARALLELISM, ENGINES = 18, 2, 3


def _env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": url,
        "SLUICE_ENGINE__WORKERS": "2",
        "SLUICE_ENGINE__PARALLELISM": str(PARALLELISM),
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
    }


def _owners(url: str) -> list[tuple[str, str, str | None]]:
    """(id, phase, owner) of every execution."""
    sql = "SELECT id, phase, owner FROM executions"
    if url.startswith("sqlite"):
        with sqlite3.connect(url.split(":///", 1)[1], timeout=10) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[return-value]


async def _launch(url: str) -> None:
    flows = load_module("flows", str(FLOWS))
    rt = await Runtime.open(fast_settings(url), upgrade=True)
    try:
        for _ in range(BACKLOG):
            await rt.launch(flows.long_nap, {"seconds": 0.15})
    finally:
        await rt.close()


def _watch(
    url: str, until: Callable[[], bool], seen: dict[str, set[str]], peak: dict[str, int]
) -> None:
    deadline = time.monotonic() + 90
    while not until():
        assert time.monotonic() < deadline, "the backlog did not drain in time"
        rows = _owners(url)
        held: dict[str, int] = defaultdict(int)
        for execution_id, _, owner in rows:
            if owner:
                seen[owner].add(execution_id)
                held[owner] += 1
        for owner, count in held.items():
            peak[owner] = max(peak.get(owner, 0), count)
        time.sleep(0.02)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_engines_share_a_backlog_and_take_over_a_killed_one(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = (
        f"sqlite:///{tmp_path / 's.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    asyncio.run(_launch(url))
    stderr = [tmp_path / f"engine{k}.err" for k in range(ENGINES)]
    engines = [
        subprocess.Popen(
            [sys.executable, "-m", "sluice", "engine"],
            env=_env(url),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr[k].open("w"),
            text=True,
        )
        for k in range(ENGINES)
    ]
    seen: dict[str, set[str]] = defaultdict(set)
    peak: dict[str, int] = {}
    try:
        ids = []
        for engine in engines:
            assert engine.stdout is not None
            ids.append(engine.stdout.readline().split()[1])
        victim = ids[0]
        # Kill the first engine while it drives executions.
        _watch(url, lambda: any(o == victim for _, _, o in _owners(url)), seen, peak)
        engines[0].send_signal(signal.SIGKILL)
        engines[0].wait(timeout=10)  # reaped: a zombie would still look alive
        orphaned = {i for i, _, o in _owners(url) if o == victim}
        _watch(url, lambda: all(p == "SUCCEEDED" for _, p, _ in _owners(url)), seen, peak)
    finally:
        for engine in engines:
            if engine.poll() is None:
                engine.send_signal(signal.SIGTERM)
        codes = [engine.wait(timeout=30) for engine in engines]
    logs = [path.read_text() for path in stderr[1:]]
    assert codes[1:] == [0] * (ENGINES - 1), logs
    assert not any("lost" in log for log in logs), logs  # no live engine was taken from
    survivors = set(ids[1:])
    assert all(seen[engine] for engine in ids), {e: len(seen[e]) for e in ids}
    assert all(peak.get(engine, 0) <= PARALLELISM for engine in ids), peak
    taken_over = {i for i in orphaned if any(i in seen[s] for s in survivors)}
    assert orphaned and taken_over == orphaned, (orphaned, taken_over)
