"""http_job through the engine: its quota token comes from the resource manager (a refused
job waits with the manager's reason and is woken by the release), and the job's result flows
on to the next node."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import sluice
from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from support.engine import outcome
from support.jobservice import JobService


def _flow(url: str, flows: ModuleType) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    config = {
        "create": {"url": f"{url}/jobs", "body": {"duration": 0.2, "result": "job-{n}"}},
        "status_url": f"{url}/jobs/{{job_id}}",
        "states": {
            "queued": "QUEUED",
            "running": "RUNNING",
            "succeeded": "SUCCESS",
            "failed": "PERMANENT_FAILURE",
        },
        "outputs": {"o0": "result"},
    }

    @sluice.task(type="http_job", custom=config, name="tests.fetch")
    def fetch(n: int) -> str: ...

    @sluice.workflow(name="tests.http_flow")
    def flow() -> str:
        return flows.join_strings(parts=[fetch(n=i) for i in range(3)])

    return flow


async def test_http_jobs_share_a_quota_of_one_and_feed_the_next_node(
    tmp_path: Path, flows: ModuleType
) -> None:
    settings = load_config(
        database_url=f"sqlite:///{tmp_path / 's.db'}",
        engine={"workers": 1, "resync_interval": 1.0},
        plugins={
            "config": {
                "http_job": {"resource_quotas": {"default": 1}, "caching": {"resync_interval": 5}}
            }
        },
    )
    async with JobService() as service:
        rt = await Runtime.open(settings)
        try:
            record = await rt.launch(_flow(service.url, flows), {})
            engine = await rt.engine(only=[record.id])
            await engine.start()
            reasons: set[str] = set()

            async def watch() -> None:
                while True:
                    nodes = (await outcome(rt, record.id)).nodes.values()
                    reasons.update(n.reason for n in nodes if n.task_phase == 2)
                    await asyncio.sleep(0.05)

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(engine.wait(record.id), 120)
            watcher.cancel()
            await engine.stop()
            result = await outcome(rt, record.id)
        finally:
            await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": "job-0,job-1,job-2"}
    assert service.created == 3 and service.max_in_flight == 1
    assert any("http_job:default: 1/1 in use" in r for r in reasons), reasons
