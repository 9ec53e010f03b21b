"""Helpers for tests that kill -9 a `sluice` process and restart an engine on its store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

ROOT = Path(__file__).resolve().parents[2]


def env(
    db: Path, workers: int = 2, *, config: Path | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a `sluice` process on the SQLite store `db` (and `config`, if any)."""
    values = {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": str(workers),
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
        **(extra or {}),
    }
    if config is not None:
        values["SLUICE_CONFIG"] = str(config)
    return values


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []


def wait(condition: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


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


class Options(TypedDict, total=False):
    """How a `sluice` process is started: its config file, where its stderr goes (else
    nowhere), its working directory (else the checkout) and more environment."""

    config: Path
    stderr: Path
    cwd: Path
    extra: dict[str, str]


def sluice(
    args: Sequence[str], db: Path, workers: int = 2, **options: Unpack[Options]
) -> subprocess.Popen[bytes]:
    """Start `python -m sluice ARGS` on the store `db`."""
    stderr = options.get("stderr")
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        env=env(db, workers, config=options.get("config"), extra=options.get("extra")),
        cwd=options.get("cwd", ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if stderr is None else stderr.open("w"),
    )


def kill_9(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL `process` and wait until its worker processes are gone too."""
    workers = children(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait(lambda: not any(alive(pid) for pid in workers), timeout=10)


def kill_9_when(
    process: subprocess.Popen[bytes], condition: Callable[[], bool], timeout: float = 60.0
) -> None:
    """Wait for `condition`, then kill -9 `process` (and see its workers gone); it never outlives
    this call, even when the condition is not met."""
    try:
        wait(condition, timeout)
        kill_9(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def run_engine_until(
    db: Path,
    condition: Callable[[], bool],
    workers: int = 2,
    timeout: float = 60.0,
    **options: Unpack[Options],
) -> None:
    """Run `sluice engine` on the store until `condition`, then stop it with SIGTERM; it must
    exit cleanly (its stderr, when kept, is in the failure message)."""
    engine = sluice(["engine"], db, workers, **options)
    try:
        wait(condition, timeout)
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    stderr = options.get("stderr")
    assert engine.returncode == 0, stderr.read_text() if stderr is not None else ""


def execution_phases(db: Path) -> list[tuple[object, ...]]:
    return query(db, "SELECT phase FROM executions")


def only_outputs(db: Path) -> object:
    """The decoded outputs of the store's only execution."""
    ((outputs,),) = query(db, "SELECT outputs FROM executions")
    return json.loads(str(outputs))


def resume_until_succeeded(db: Path, workers: int = 2, **options: Unpack[Options]) -> None:
    """After a kill -9: the store's only execution is still RUNNING; an engine restarted on the
    store ends it in SUCCEEDED and stops cleanly."""
    assert execution_phases(db) == [("RUNNING",)]
    succeeded = lambda: execution_phases(db) == [("SUCCEEDED",)]  # noqa: E731
    run_engine_until(db, succeeded, workers, 180.0, **options)
