"""kill -9 of `sluice run` while a flytekit ray task's job runs: the job goes on on the
cluster, a restarted engine finds it by its submission id (one submission in all) and
collects the flytekit task's outputs."""

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

import pytest
from tests.plugins.ray.helpers import cluster_jobs

from support.flyte import FLOWS_ROOT

pytestmark = pytest.mark.usefixtures("flytekit_plugins")
TASKS = FLOWS_ROOT / "pluginflows" / "tasks.py"


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []


def _wait(condition: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _sluice(args: list[str], env: dict[str, str], err: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        env=env,
        cwd=err.parent,
        stdout=subprocess.DEVNULL,
        stderr=err.open("w"),
    )


def test_kill_9_while_a_flytekit_ray_job_runs_submits_once_and_collects_outputs(
    ray_address: str, tmp_path: Path
) -> None:
    db, config, go = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    config.write_text(f'[plugins.config.ray]\naddress = "{ray_address}"\n')
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_CONFIG": str(config),
        "SLUICE_ENGINE__WORKERS": "1",
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
    }
    run = _sluice(["run", f"{TASKS}:ray_waiting", "--input", f"path={go}"], env, tmp_path / "r")
    try:
        _wait(lambda: bool(_query(db, "SELECT id FROM executions")))
        ((execution_id,),) = _query(db, "SELECT id FROM executions")

        def running() -> bool:
            return [j.status for j in cluster_jobs(ray_address, str(execution_id))] == ["RUNNING"]

        _wait(running)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    assert _query(db, "SELECT phase FROM executions") == [("RUNNING",)]
    go.write_text("written while the engine was dead")
    engine = _sluice(["engine"], env, tmp_path / "e")
    try:
        _wait(lambda: _query(db, "SELECT phase FROM executions") == [("SUCCEEDED",)])
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    (outputs,) = _query(db, "SELECT outputs FROM executions")[0]
    assert json.loads(str(outputs)) == {"o0": "written while the engine was dead"}
    jobs = cluster_jobs(ray_address, str(execution_id))
    assert [j.status for j in jobs] == ["SUCCEEDED"], jobs  # one submission, never two
    assert engine.returncode == 0, (tmp_path / "e").read_text()
