"""kill -9 of the engine mid-execution: a restarted engine resumes from the store without
re-running completed nodes. The task that was in flight runs again (at-least-once)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from support.crash import alive as _alive
from support.crash import children as _children
from support.crash import env as _env
from support.crash import query as _query
from support.crash import wait as _wait
from support.engine import FLOWS

ROOT = Path(__file__).resolve().parents[2]


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
