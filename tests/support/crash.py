"""Helpers for tests that kill -9 a `sluice` process and restart an engine on its store."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def env(db: Path, workers: int = 2) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": str(workers),
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
    }


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []


def wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def sluice(args: Sequence[str], db: Path, workers: int = 2) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        env=env(db, workers),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_9(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL `process` and wait until its worker processes are gone too."""
    workers = children(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait(lambda: not any(alive(pid) for pid in workers), timeout=10)


def run_engine_until(db: Path, condition: Callable[[], bool], workers: int = 2) -> None:
    """Run `sluice engine` on the store until `condition`, then stop it with SIGTERM."""
    engine = sluice(["engine"], db, workers)
    try:
        wait(condition)
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=30)
    assert engine.returncode == 0
