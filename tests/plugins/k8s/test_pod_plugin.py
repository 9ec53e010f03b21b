"""The builtin `pod` plugin: its entry, its config, and whole runs driven as the engine would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.plugins.k8s.helpers import InstantClock, task_context

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.builtin.pod import ENTRY, PLUGIN_ID
from sluice.plugins.core.phase import Phase
from sluice.plugins.core.registry import PluginRegistry
from sluice.plugins.k8s import KindRef, LazyKubeClient, ObjectRef, PluginManager
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import drive, setup_context
from sluice.spec.models import Interface, TaskSpec


def load(config: dict[str, Any] | None = None, kube: FakeKubeClient | None = None) -> Any:
    setup, _ = setup_context(PLUGIN_ID, config)
    setup.kube_client = kube
    return ENTRY.load(setup)


def test_entry_routes_container_tasks():
    assert (ENTRY.id, ENTRY.task_types) == ("pod", ("container",))


async def test_registry_loads_it_without_a_cluster():
    registry = PluginRegistry([ENTRY])
    await registry.load(lambda entry: setup_context(entry.id, {})[0])
    plugin = registry.resolve("container")
    assert isinstance(plugin, PluginManager)
    assert plugin.properties.generated_name_max_length == 50
    await plugin.close()


def test_without_an_engine_client_it_connects_lazily():
    manager = load({"kubeconfig": "/nowhere", "namespace": "batch"})
    assert isinstance(manager._client, LazyKubeClient)  # nothing was contacted yet


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"namespace": "{tenant}"}, "plugins.config.pod.namespace"),
        ({"finalizer_backoff": {"retries": -1}}, "plugins.config.pod.finalizer_backoff.retries"),
        ({"gpu_resource_name": 3}, "plugins.config.pod.gpu_resource_name"),
        ({"no_such_key": 1}, "plugins.config.pod.no_such_key"),
    ],
)
def test_bad_config_names_the_key(config, key):
    with pytest.raises(InvalidPluginConfigError, match=key.replace(".", r"\.")):
        load(config)


async def kubelet(kube: FakeKubeClient, final: dict[str, Any]) -> None:
    """Plays the node: the pod is scheduled, runs, then ends with `final` status."""
    pods = kube.watch(KindRef("v1", "Pod"), "batch", resource_version="0")
    ref = ObjectRef.of((await anext(pods)).object)
    await pods.aclose()
    kube.set_status(
        ref, {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    )
    kube.set_status(ref, {"phase": "Running"})
    kube.set_status(ref, final)


async def run(kube: FakeKubeClient, task: TaskSpec, final: dict[str, Any]) -> list[Any]:
    manager = load({"namespace": "batch"}, kube)
    ctx = task_context(InstantClock(), task)
    node = asyncio.create_task(kubelet(kube, final))
    try:
        return await drive(manager, ctx, interval=0.005)
    finally:
        await node
        await manager.close()


async def test_a_container_task_runs_to_success_and_leaves_nothing_behind():
    kube = FakeKubeClient()
    task = TaskSpec(
        name="hello",
        version="1",
        type="container",
        custom={"image": "busybox", "command": ["echo", "hi"]},
    )

    seen = await run(kube, task, {"phase": "Succeeded"})

    assert seen[0].phase is Phase.QUEUED
    assert seen[-1].phase is Phase.SUCCESS
    assert kube.objects == {}
    created = [target for op, target in kube.calls if op == "create"]
    assert len(created) == 1
    assert created[0].namespace == "batch"


async def test_an_oom_killed_pod_fails_retryably_and_is_deleted():
    kube = FakeKubeClient()
    task = TaskSpec(name="big", version="1", type="container", custom={"image": "busybox"})
    final = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
        ],
    }

    seen = await run(kube, task, final)

    assert seen[-1].phase is Phase.RETRYABLE_FAILURE
    assert seen[-1].error.code == "OOMKilled"
    assert kube.objects == {}


async def test_a_container_task_with_outputs_fails_before_creating_anything():
    kube = FakeKubeClient()
    interface = Interface.model_validate({"outputs": {"n": {"kind": "int"}}})
    task = TaskSpec(
        name="t", version="1", type="container", interface=interface, custom={"image": "busybox"}
    )
    manager = load({}, kube)
    try:
        info = (await manager.handle(task_context(InstantClock(), task))).info
    finally:
        await manager.close()
    assert info.phase is Phase.PERMANENT_FAILURE
    assert "produces none" in info.error.message
    assert kube.calls == []
