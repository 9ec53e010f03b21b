"""kill -9 of `sluice run` while a flytekit ray task's job runs: the job goes on on the
cluster, a restarted engine finds it by its submission id (one submission in all) and
collects the flytekit task's outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.plugins.ray.helpers import cluster_jobs, job_running

from support.crash import kill_9_when, only_outputs, query, resume_until_succeeded, sluice
from support.flyte import FLOWS_ROOT

pytestmark = pytest.mark.usefixtures("flytekit_plugins")
TASKS = FLOWS_ROOT / "pluginflows" / "tasks.py"


def test_kill_9_while_a_flytekit_ray_job_runs_submits_once_and_collects_outputs(
    ray_address: str, tmp_path: Path
) -> None:
    db, config, go = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    config.write_text(f'[plugins.config.ray]\naddress = "{ray_address}"\n')
    args = ["run", f"{TASKS}:ray_waiting", "--input", f"path={go}"]
    run = sluice(args, db, 1, config=config, stderr=tmp_path / "r", cwd=tmp_path)
    kill_9_when(run, job_running(db, ray_address), timeout=180)
    go.write_text("written while the engine was dead")
    resume_until_succeeded(db, 1, config=config, stderr=tmp_path / "e", cwd=tmp_path)
    assert only_outputs(db) == {"o0": "written while the engine was dead"}
    jobs = cluster_jobs(ray_address, str(query(db, "SELECT id FROM executions")[0][0]))
    assert [j.status for j in jobs] == ["SUCCEEDED"], jobs  # one submission, never two
