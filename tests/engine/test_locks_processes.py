"""Locks are global: several `sluice run` processes on one store never hold a capacity-1 lock
twice at one moment, checked from the event log (GRANTED .. RELEASED per node) and from the
tasks' own records. `sluice locks ls` shows holders and waiters."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from support.engine import FLOWS
from support.intervals import max_overlap, read

ROOT = Path(__file__).resolve().parents[2]


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "2"}


def _lock_intervals(db: Path) -> dict[str, list[tuple[float, float]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT execution_id, node_id, phase, occurred_at, info FROM events "
            "WHERE phase IN ('GRANTED', 'RELEASED') ORDER BY id"
        ).fetchall()
    opened: dict[tuple[str, str], float] = {}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for execution_id, node_id, phase, at, info in rows:
        key = (execution_id, node_id)
        if phase == "GRANTED":
            opened[key] = at
        else:
            granted_at = opened.pop(key)
            for namespace in json.loads(info)["namespaces"]:
                spans[namespace].append((granted_at, at))
    assert not opened, "every grant was released"
    return spans


def test_four_processes_never_share_a_lock(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    subprocess.run(
        [sys.executable, "-m", "sluice", "db", "upgrade"],
        env=_env(db),
        check=True,
        capture_output=True,
    )
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice",
                "run",
                f"{FLOWS}:partition_burst_{k}",
                "--input",
                f"directory={work}",
            ],
            env=_env(db),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    codes = [(p.wait(timeout=240), p.stderr.read() if p.stderr else "") for p in runs]
    assert [c for c, _ in codes] == [0, 0, 0, 0], codes
    spans = _lock_intervals(db)
    assert set(spans) == {f"lock:db/partition/{p}" for p in range(4)}
    assert sum(len(s) for s in spans.values()) == 4 * 6 * 2
    for namespace, intervals in spans.items():
        assert max_overlap(intervals) == 1, namespace
    for partition in range(4):
        assert max_overlap(read(work / f"p{partition}.intervals")) == 1


def test_locks_ls_shows_holders_and_waiters(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "block").touch()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sluice",
            "run",
            f"{FLOWS}:partition_writes",
            "--input",
            f"directory={work}",
        ],
        env={**_env(db), "SLUICE_ENGINE__RESYNC_INTERVAL": "0.5"},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        rows: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [sys.executable, "-m", "sluice", "locks", "ls", "--json"],
                env=_env(db),
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            rows = json.loads(listed.stdout) if listed.returncode == 0 and listed.stdout else []
            if any(r["holders"] and r["waiters"] for r in rows):
                break
            time.sleep(0.1)
        busy = [r for r in rows if r["holders"] and r["waiters"]]
        assert busy, rows
        waiter = busy[0]["waiters"][0]  # type: ignore[index]
        assert "waiting for lock" in waiter["reason"] or "position" in waiter["reason"]
    finally:
        (work / "block").unlink()
        run.wait(timeout=120)
    assert run.returncode == 0
