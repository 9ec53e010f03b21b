"""Flytekit plugin task types run on sluice's plugins, with the real flytekit and real local
clusters: a flytekitplugins-ray task as a Ray job (flytekit's own `ray.init` joins the job's
cluster; its runtime_env applies), a flytekitplugins-dask task on a Dask worker, a recoverable
error retried and a non-recoverable one not (as in Flyte), and a ContainerTask as the pod
plugin's container task (driven against the in-memory Kubernetes API: no cluster here)."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.plugins.k8s.helpers import InstantClock, task_context
from tests.plugins.ray.helpers import cluster_jobs

from sluice.config import Settings, load_config
from sluice.errors import DefinitionError, PluginNotFoundError
from sluice.flyte.resolve import resolve_flytekit
from sluice.plugins.builtin.pod import ENTRY as POD
from sluice.plugins.core.phase import Phase
from sluice.plugins.k8s import KindRef, ObjectRef
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import drive, setup_context
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from support.engine import run
from support.flyte import FLOWS_ROOT

pytestmark = pytest.mark.usefixtures("flytekit_plugins")


@pytest.fixture
def flows() -> ModuleType:
    if str(FLOWS_ROOT) not in sys.path:  # the package the tasks' module imports from
        sys.path.insert(0, str(FLOWS_ROOT))
    return importlib.import_module("pluginflows.tasks")


def settings(db: Path, ray: str | None = None, dask: str | None = None) -> Settings:
    plugins: dict[str, Any] = {}
    if ray:
        plugins["ray"] = {"address": ray}
    if dask:
        plugins["dask"] = {"address": dask}
    return load_config(
        database_url=f"sqlite:///{db}",
        engine={"workers": 1, "backoff_base": 0.05, "backoff_max": 0.2},
        plugins={"config": plugins},
    )


def only_task(target: Any) -> Any:
    workflow, _ = resolve_flytekit(target)
    (task,) = workflow.tasks.values()
    return task


def test_the_flyteidl_configs_become_the_plugins_configs(flows: ModuleType) -> None:
    ray, dask, greet = (only_task(t) for t in (flows.ray_squares, flows.dask_total, flows.greet))
    assert (ray.type, dask.type, greet.type) == ("ray", "dask", "container")
    assert ray.custom["head_cpus"] == 1 and ray.custom["worker_groups"] == []
    assert ray.custom["runtime_env"] == {"env_vars": {"SLUICE_FLYTE_MARK": "from the runtime env"}}
    assert ray.custom["flyte"]["template"]["type"] == "ray"
    assert dask.custom["workers"] == 2 and dask.custom["flyte"]["template"]["type"] == "dask"
    assert greet.custom == {
        "image": "busybox:1.36",
        "command": ["echo", "hello {{inputs.name}}", "{{inputs.times}}"],
        "args": [],
        "env": {"MODE": "test"},
        "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    }


def test_worker_groups_and_their_cpus_are_kept() -> None:
    from flytekit import task
    from flytekitplugins.ray import RayJobConfig, WorkerNodeConfig

    groups = [
        WorkerNodeConfig(group_name="big", replicas=2, ray_start_params={"num-cpus": "4"}),
        WorkerNodeConfig(group_name="small", replicas=1),
    ]

    @task(task_config=RayJobConfig(worker_node_config=groups, shutdown_after_job_finishes=True))
    def grouped() -> int:
        return 1

    custom = only_task(grouped).custom
    assert custom["worker_groups"] == [
        {"name": "big", "replicas": 2, "cpus": 4},
        {"name": "small", "replicas": 1, "cpus": 1},
    ]
    assert custom["shutdown_after_job"] is True and "head_cpus" not in custom


def test_a_container_task_with_outputs_is_refused_naming_them(flows: ModuleType) -> None:
    with pytest.raises(DefinitionError, match=r"Flyte task 'counts'.*outputs \['n'\]"):
        resolve_flytekit(flows.counts)


async def test_a_ray_task_then_a_dask_task_run_on_their_clusters(
    flows: ModuleType, ray_address: str, dask_address: str, tmp_path: Path
) -> None:
    rt = await Runtime.open(settings(tmp_path / "s.db", ray_address, dask_address))
    try:
        result = await run(rt, flows.ray_then_dask, n=4)
        where = await run(rt, flows.ray_where)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    total, _, worker = result.record.outputs["o0"].partition("@")
    assert total == str(sum(range(0 + 1 + 4 + 9)))  # dask_total of ray_squares(4) = 14
    assert worker.startswith("tcp://127.0.0.1:")  # ran on a worker of the Dask cluster
    (job,) = cluster_jobs(ray_address, result.record.id)
    assert job.status == "SUCCEEDED"  # one Ray job, for ray_squares
    assert where.record.phase is ExecutionPhase.SUCCEEDED, where.record.error
    mark, _, job_id = where.record.outputs["o0"].partition("|")
    assert mark == "from the runtime env"
    assert job_id == cluster_jobs(ray_address, where.record.id)[0].job_id


async def test_ray_task_errors_are_retried_only_when_recoverable(
    flows: ModuleType, ray_address: str, tmp_path: Path
) -> None:
    rt = await Runtime.open(settings(tmp_path / "s.db", ray_address))
    try:
        flaky = await run(rt, flows.ray_flaky, n=1)
        broken = await run(rt, flows.ray_broken, n=2)
    finally:
        await rt.close()
    for result, attempts, text in ((flaky, 2, "ray_flaky failed on 1"), (broken, 1, "ray_broken")):
        assert result.record.phase is ExecutionPhase.FAILED
        (node,) = result.nodes.values()
        assert node.error is not None and text in node.error["message"], node.error
        assert node.error["kind"] == "USER"
        assert len(cluster_jobs(ray_address, result.record.id)) == attempts


async def test_a_container_task_runs_as_the_pod_plugins_pod(flows: ModuleType) -> None:
    kube = FakeKubeClient()
    setup, _ = setup_context("pod", {"namespace": "batch"})
    setup.kube_client = kube
    manager = POD.load(setup)
    ctx = task_context(InstantClock(), only_task(flows.greet))
    ctx.inputs = {"name": "ada", "times": 2}
    node = asyncio.create_task(_kubelet(kube))
    try:
        seen = await drive(manager, ctx, interval=0.005)
    finally:
        pod = await node
        await manager.close()
    assert seen[-1].phase is Phase.SUCCESS
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "busybox:1.36"
    assert container["command"] == ["echo", "hello ada", "2"]
    assert {"name": "MODE", "value": "test"} in container["env"]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "64Mi"}


async def _kubelet(kube: FakeKubeClient) -> dict[str, Any]:
    """Plays the node: the pod runs and succeeds; returns the pod as created."""
    pods = kube.watch(KindRef("v1", "Pod"), "batch", resource_version="0")
    created = (await anext(pods)).object
    await pods.aclose()
    ref = ObjectRef.of(created)
    kube.set_status(ref, {"phase": "Running"})
    kube.set_status(ref, {"phase": "Succeeded"})
    return dict(created)


async def test_another_plugin_task_type_is_refused_at_launch_naming_it(tmp_path: Path) -> None:
    """A type no sluice plugin handles is translated as it is (a plugin routed to it, such as
    a Flyte agent, could run it) and refused at launch, before anything is written."""
    from flytekit.core.python_function_task import PythonFunctionTask

    def train(epochs: int) -> int:
        return epochs

    spark_like = PythonFunctionTask(task_config=None, task_function=train, task_type="spark")
    workflow, _ = resolve_flytekit(spark_like)
    assert [t.type for t in workflow.tasks.values()] == ["spark"]
    runtime = await Runtime.open(load_config(None, database_url=f"sqlite:///{tmp_path / 's.db'}"))
    try:
        with pytest.raises(
            PluginNotFoundError, match=r"task '.*train': no plugin handles task type 'spark'"
        ):
            await runtime.check_launch(spark_like, {"epochs": 1})
    finally:
        await runtime.close()
