"""kill -9 of the engine while its Ray job runs: the job goes on on the cluster, a restarted
engine finds it by its submission id (one submission in all) and collects its result."""

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

from tests.plugins.ray.conftest import RAY_FLOWS
from tests.plugins.ray.helpers import cluster_jobs

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


def test_kill_9_while_a_ray_job_runs_submits_once_and_collects_the_result(
    ray_address: str, tmp_path: Path
) -> None:
    db, config, signal_file = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    config.write_text(f'[plugins.config.ray]\naddress = "{ray_address}"\n')
    env = _env(db, config)
    run = _sluice(
        ["run", f"{RAY_FLOWS}:waiting", "--input", f"path={signal_file}"], env, tmp_path / "r.err"
    )
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
    signal_file.write_text("done while the engine was dead")
    engine = _sluice(["engine"], env, tmp_path / "e.err")
    try:
        _wait(lambda: _query(db, "SELECT phase FROM executions") == [("SUCCEEDED",)])
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    (outputs,) = _query(db, "SELECT outputs FROM executions")[0]
    assert json.loads(str(outputs)) == {"o0": "done while the engine was dead"}
    jobs = cluster_jobs(ray_address, str(execution_id))
    assert [j.status for j in jobs] == ["SUCCEEDED"], jobs  # one submission, never two
    assert engine.returncode == 0, (tmp_path / "e.err").read_text()


def test_kill_9_while_a_ray_task_runs_in_task_mode_runs_it_once_and_collects_it(
    ray_cluster: object, tmp_path: Path
) -> None:
    import asyncio

    from tests.plugins.ray.helpers import host_stats

    gcs, host = str(ray_cluster.gcs_address), f"crash-{tmp_path.name}"  # type: ignore[attr-defined]
    db, config = tmp_path / "s.db", tmp_path / "sluice.toml"
    signal_file, started = tmp_path / "go", tmp_path / "started"
    config.write_text(f'[plugins.config.ray]\ngcs_address = "{gcs}"\ntask_host = "{host}"\n')
    env = _env(db, config)
    inputs = ["--input", f"path={signal_file}", "--input", f"started={started}"]
    run = _sluice(["run", f"{RAY_FLOWS}:t_waiting", *inputs], env, tmp_path / "r.err")
    try:
        _wait(lambda: started.exists() and started.read_text().endswith("\n"))
        run.send_signal(signal.SIGKILL)  # the Ray task runs: the engine dies
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
    assert len(started.read_text().splitlines()) == 1  # the function ran once
    stats = asyncio.run(host_stats(gcs, host))
    assert stats["submitted"] == 1 and stats["held"] == 0, stats  # one submission, collected
    assert engine.returncode == 0, (tmp_path / "e.err").read_text()
