"""Reading the test cluster's jobs, and settings that point the ray plugin at it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.config import Settings, load_config
from support.crash import query


def cluster_jobs(address: str, execution_id: str) -> list[Any]:
    """The cluster's jobs submitted for one execution (JobDetails), oldest first."""
    from ray.job_submission import JobSubmissionClient

    jobs = JobSubmissionClient(address).list_jobs()
    mine = [j for j in jobs if (j.metadata or {}).get("sluice_execution") == execution_id]
    return sorted(mine, key=lambda j: j.start_time or 0)


def ray_settings(db: Path, address: str, **resources: Any) -> Settings:
    return load_config(
        database_url=f"sqlite:///{db}",
        engine={"workers": 1, "resync_interval": 2.0, "backoff_base": 0.05, "backoff_max": 0.2},
        plugins={"config": {"ray": {"address": address}}},
        resources=resources,
    )


def ray_task_settings(db: Path, gcs: str, host: str, **resources: Any) -> Settings:
    """Settings for task-mode tasks: the cluster's GCS and a task host of the test's own."""
    config = {"gcs_address": gcs, "task_host": host, "task_result_grace": 0}
    return load_config(
        database_url=f"sqlite:///{db}",
        engine={"workers": 1, "resync_interval": 2.0, "backoff_base": 0.05, "backoff_max": 0.2},
        plugins={"config": {"ray": config}},
        resources=resources,
    )


async def host_stats(gcs: str, host: str) -> dict[str, int]:
    """What the task host `host` says of itself: submitted, held, released."""
    from sluice.plugins.ray.driver import RayDriver

    driver = RayDriver()
    try:
        handle = await driver.host(gcs, host)
        return dict(await driver.call(host, handle.stats.remote()))
    finally:
        await driver.close()


def job_running(db: Path, address: str) -> Callable[[], bool]:
    """A probe for a kill -9 test: true once the store's only execution's Ray job RUNS on the
    cluster at `address` (the execution's id is the job's prefix)."""

    def running() -> bool:
        rows = query(db, "SELECT id FROM executions")
        jobs = cluster_jobs(address, str(rows[0][0])) if rows else []
        return [j.status for j in jobs] == ["RUNNING"]

    return running
