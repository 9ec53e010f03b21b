"""kill -9 of the engine mid-execution: a restarted engine resumes from the store without
re-running completed nodes. The task that was in flight runs again (at-least-once)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from support.engine import FLOWS

ROOT = Path(__file__).resolve().parents[2]


def _env(db: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": "2",
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
    }


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
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


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _count(work: Path, name: str) -> int:
    path = work / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_kill_9_resumes_without_rerunning_completed_nodes(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "block").touch()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sluice",
            "run",
            f"{FLOWS}:resumable",
            "--input",
            f"directory={work}",
        ],
        env=_env(db),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(
            lambda: (
                _query(db, "SELECT phase FROM node_executions WHERE node_id = 'step_one'")
                == [("SUCCEEDED",)]
                and _count(work, "two") == 1
            )
        )
        workers = _children(run.pid)
        assert workers, "the engine had worker processes"
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        _wait(lambda: not any(_alive(pid) for pid in workers), timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    (work / "block").unlink()
    engine = subprocess.Popen(
        [sys.executable, "-m", "sluice", "engine"],
        env=_env(db),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: _query(db, "SELECT phase FROM executions") == [("SUCCEEDED",)])
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=30)
    (outputs,) = _query(db, "SELECT outputs FROM executions")[0]
    assert json.loads(str(outputs)) == {"o0": 3}
    assert (_count(work, "one"), _count(work, "two"), _count(work, "three")) == (1, 2, 1)
    assert engine.returncode == 0
