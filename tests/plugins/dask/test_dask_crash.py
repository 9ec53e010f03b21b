"""kill -9 of the engine while its Dask task runs on an external scheduler: the task, published
under its key, goes on; a restarted engine takes it back (one run in all) and collects its
result."""

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

from tests.plugins.dask.conftest import DASK_FLOWS

ROOT = Path(__file__).resolve().parents[3]


def _env(db: Path, config: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_CONFIG": str(config),
        "SLUICE_ENGINE__WORKERS": "1",
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


def _wait(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _sluice(args: list[str], env: dict[str, str], err: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=err.open("w"),
    )


def test_kill_9_while_a_dask_task_runs_runs_it_once_and_collects_the_result(
    dask_address: str, tmp_path: Path
) -> None:
    db, config, signal_file = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    runs = tmp_path / "runs"
    config.write_text(f'[plugins.config.dask]\naddress = "{dask_address}"\n')
    env = _env(db, config)
    inputs = ["--input", f"path={signal_file}", "--input", f"runs={runs}"]
    run = _sluice(["run", f"{DASK_FLOWS}:waiting", *inputs], env, tmp_path / "r.err")
    try:
        _wait(runs.exists)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    assert _query(db, "SELECT phase FROM executions") == [("RUNNING",)]
    signal_file.write_text("done while the engine was dead")
    engine = _sluice(["engine"], env, tmp_path / "e.err")
    try:
        _wait(lambda: _query(db, "SELECT phase FROM executions") == [("SUCCEEDED",)])
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    (outputs,) = _query(db, "SELECT outputs FROM executions")[0]
    assert json.loads(str(outputs)) == {"o0": "done while the engine was dead"}
    assert runs.read_text() == "run\n"  # one run, never two
    assert engine.returncode == 0, (tmp_path / "e.err").read_text()
