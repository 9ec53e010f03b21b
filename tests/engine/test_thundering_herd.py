"""The thundering herd: 8 separate processes start the same serializable task with the same
inputs at once. The body runs exactly once (counted outside the store) and all 8 get its
outputs. With the owner killed by SIGKILL mid-run, exactly one other takes over after the
reservation expires and all the rest finish with the same outputs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from support.engine import FLOWS

ROOT = Path(__file__).resolve().parents[2]
HERD = 8


def _env(db: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": "1",
        "SLUICE_CACHE__MAX_RESERVATION_HEARTBEAT": "1",
        "SLUICE_CACHE__HEARTBEAT_INTERVAL": "1",
    }


def _start(db: Path, work: Path) -> list[subprocess.Popen[str]]:
    subprocess.run(
        [sys.executable, "-m", "sluice", "db", "upgrade"],
        env=_env(db),
        check=True,
        capture_output=True,
    )
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice",
                "run",
                f"{FLOWS}:herd",
                "--json",
                "--input",
                f"directory={work}",
            ],
            env=_env(db),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(HERD)
    ]


def _runs(work: Path) -> list[int]:
    path = work / "expensive.runs"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _parent(pid: int) -> int:
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])


def _finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, dict[str, object]]]:
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=180)
        results.append((process.returncode, json.loads(out) if out.strip() else {}))
    return results


def _wait_for_runs(work: Path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(_runs(work)) < count:
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.05)


def test_eight_processes_compute_once(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "hold").touch()  # keep the first runner busy until every process is waiting
    processes = _start(db, work)
    try:
        _wait_for_runs(work, 1)
        deadline = time.monotonic() + 120
        while _waiting(db) < HERD - 1:
            assert time.monotonic() < deadline, "the others never waited for the cache"
            time.sleep(0.1)
        (work / "hold").unlink()
        results = _finish(processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [code for code, _ in results] == [0] * HERD
    assert [r["outputs"] for _, r in results] == [{"o0": 42}] * HERD
    assert len(_runs(work)) == 1


def _waiting(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM node_executions WHERE task_phase = 9"
            ).fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0])


def test_owner_killed_mid_run_one_other_takes_over(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "hold").touch()
    processes = _start(db, work)
    try:
        _wait_for_runs(work, 1)
        owner_engine = _parent(_runs(work)[0])
        victim = next(p for p in processes if p.pid == owner_engine)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        (work / "hold").unlink()
        survivors = [p for p in processes if p is not victim]
        results = _finish(survivors)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [code for code, _ in results] == [0] * (HERD - 1)
    assert [r["outputs"] for _, r in results] == [{"o0": 42}] * (HERD - 1)
    runs = _runs(work)
    assert len(runs) == 2, f"expected the killed run and exactly one takeover, got {runs}"
