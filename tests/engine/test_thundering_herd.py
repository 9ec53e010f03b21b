"""The thundering herd: 8 separate processes start the same serializable task with the same
inputs at once. The body runs exactly once (recorded outside the store) and all 8 get its
outputs. With the owner killed by SIGKILL mid-run, exactly one other takes over after the
reservation expires and all the rest finish with the same outputs.

Judged over what really happened: each body records its start and end (with its pid and its
engine's), a killed engine's body dies with it (python workers do), and at no instant are two
bodies of the key alive: the takeover starts only after the owner died."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from support.intervals import max_overlap

ROOT = Path(__file__).resolve().parents[2]
HERD_FLOWS = ROOT / "tests" / "support" / "herd_flows.py"
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
                f"{HERD_FLOWS}:herd",
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


def _history(work: Path) -> list[dict[str, float]]:
    path = work / "expensive.history"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _runs(work: Path) -> list[int]:
    """The pids of the bodies that started."""
    return [int(line["pid"]) for line in _history(work) if line["ev"] == "start"]


def _lives(work: Path, deaths: dict[int, float]) -> list[tuple[float, float]]:
    """Each body's life: from its start to its end, or to its engine's death if earlier."""
    ends = {int(line["pid"]): line["t"] for line in _history(work) if line["ev"] == "end"}
    lives = []
    for line in _history(work):
        if line["ev"] != "start":
            continue
        death = deaths.get(int(line["engine"]), float("inf"))
        end = min(ends.get(int(line["pid"]), float("inf")), death)
        assert end < float("inf"), f"body {line} never ended and its engine lived"
        lives.append((line["t"], end))
    return lives


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
    assert [line["ev"] for line in _history(work)] == ["start", "end"]


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
        died = time.time()
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
    lives = _lives(work, {victim.pid: died})
    assert max_overlap(lives) == 1, f"two bodies of one key alive at once: {lives}"
    assert lives[1][0] >= died, "the takeover started before the owner died"
    ended = [line for line in _history(work) if line["ev"] == "end"]
    assert [int(line["pid"]) for line in ended] == [runs[1]], "only the takeover finished"
