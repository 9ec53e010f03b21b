"""kill -9 of the engine while its Ray job runs: the job goes on on the cluster, a restarted
engine finds it by its submission id (one submission in all) and collects its result."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.ray.conftest import RAY_FLOWS
from tests.plugins.ray.helpers import cluster_jobs, job_running

from support.crash import kill_9_when, only_outputs, query, resume_until_succeeded
from support.crash import sluice as _sluice


def test_kill_9_while_a_ray_job_runs_submits_once_and_collects_the_result(
    ray_address: str, tmp_path: Path
) -> None:
    db, config, signal_file = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    config.write_text(f'[plugins.config.ray]\naddress = "{ray_address}"\n')
    args = ["run", f"{RAY_FLOWS}:waiting", "--input", f"path={signal_file}"]
    run = _sluice(args, db, 1, config=config, stderr=tmp_path / "r.err")
    kill_9_when(run, job_running(db, ray_address), timeout=120)
    signal_file.write_text("done while the engine was dead")
    resume_until_succeeded(db, 1, config=config, stderr=tmp_path / "e.err")
    assert only_outputs(db) == {"o0": "done while the engine was dead"}
    jobs = cluster_jobs(ray_address, str(query(db, "SELECT id FROM executions")[0][0]))
    assert [j.status for j in jobs] == ["SUCCEEDED"], jobs  # one submission, never two


def test_kill_9_while_a_ray_task_runs_in_task_mode_runs_it_once_and_collects_it(
    ray_cluster: object, tmp_path: Path
) -> None:
    import asyncio

    from tests.plugins.ray.helpers import host_stats

    gcs, host = str(ray_cluster.gcs_address), f"crash-{tmp_path.name}"  # type: ignore[attr-defined]
    db, config = tmp_path / "s.db", tmp_path / "sluice.toml"
    signal_file, started = tmp_path / "go", tmp_path / "started"
    config.write_text(f'[plugins.config.ray]\ngcs_address = "{gcs}"\ntask_host = "{host}"\n')
    inputs = ["--input", f"path={signal_file}", "--input", f"started={started}"]
    run = _sluice(["run", f"{RAY_FLOWS}:t_waiting", *inputs], db, 1, config=config)
    # the Ray task runs: the engine dies
    kill_9_when(run, lambda: started.exists() and started.read_text().endswith("\n"), 120)
    signal_file.write_text("done while the engine was dead")
    resume_until_succeeded(db, 1, config=config, stderr=tmp_path / "e.err")
    assert only_outputs(db) == {"o0": "done while the engine was dead"}
    assert len(started.read_text().splitlines()) == 1  # the function ran once
    stats = asyncio.run(host_stats(gcs, host))
    assert stats["submitted"] == 1 and stats["held"] == 0, stats  # one submission, collected
