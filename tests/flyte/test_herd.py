"""8 separate `sluice run` processes start the same cached, serializable flytekit workflow at
once: each task body runs exactly once (recorded outside the store) and all 8 get its outputs.
The first task holds until every other process waits for its reservation."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from support.flyte import CHAIN, env, history, sluice

HERD = 8


def _waiting(db: Path) -> int:
    """Nodes waiting for another process's cache reservation (phase WAITING_FOR_CACHE)."""
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM node_executions WHERE task_phase = 9"
            ).fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0])


def _until(condition: object, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_eight_processes_run_each_body_once(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "hold").touch()
    assert sluice(db, "db", "upgrade").returncode == 0
    command = [sys.executable, "-m", "sluice", "run", f"{CHAIN}:cached", "--json"]
    processes = [
        subprocess.Popen(
            command,
            env=env(db, work),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(HERD)
    ]
    try:
        _until(lambda: history(work) == ["double"], "the first task never started")
        _until(lambda: _waiting(db) >= HERD - 1, "the others never waited for the cache")
        (work / "hold").unlink()
        outs = [p.communicate(timeout=400)[0] for p in processes]
        results = [(p.returncode, out) for p, out in zip(processes, outs, strict=True)]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [code for code, _ in results] == [0] * HERD
    outputs = [json.loads(out)["outputs"] for _, out in results]
    assert outputs == [{"o0": {"N=6": 7}}] * HERD
    assert history(work) == ["double", "describe", "shout"]
