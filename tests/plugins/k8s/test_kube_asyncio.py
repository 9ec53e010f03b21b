"""The kubernetes_asyncio client, exercised over HTTP against an emulated API server (no real
cluster), and its translation of the driver's exceptions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException
from tests.plugins.k8s.apiserver import ApiServer

from sluice.clock import FakeClock
from sluice.plugins.builtin.pod import PodPlugin
from sluice.plugins.core.phase import Phase
from sluice.plugins.k8s import (
    FINALIZER,
    KindRef,
    KubeAlreadyExistsError,
    KubeApiError,
    KubeConflictError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
    KubePluginConfig,
    KubeQuotaExceededError,
    ObjectRef,
    PluginManager,
    translate_status,
)
from sluice.plugins.k8s.kube_asyncio import KubernetesAsyncioClient, connect, translate_exception
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import FakeTaskContext
from sluice.spec.models import TaskSpec

POD = ObjectRef("v1", "Pod", "ns", "p1")
PODS = KindRef("v1", "Pod")


def pod(name: str = "p1", **labels: str) -> dict[str, object]:
    metadata = {"name": name, "namespace": "ns", "labels": labels or {"app": "x"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {}}


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    api = ApiServer(FakeKubeClient())
    await api.start()
    yield api
    await api.stop()


@pytest.fixture
async def client(server: ApiServer, tmp_path: Path) -> AsyncIterator[KubernetesAsyncioClient]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(server.kubeconfig()))  # JSON is YAML
    made = await connect(str(kubeconfig), discovery_cache=str(tmp_path / "discovery.json"))
    yield made
    await made.close()


async def test_create_get_patch_update_delete(client, server):
    created = await client.create(pod())
    assert created["metadata"]["resourceVersion"]
    assert (await client.get(POD))["metadata"]["name"] == "p1"

    patched = await client.patch(POD, {"metadata": {"finalizers": [FINALIZER]}})
    assert patched["metadata"]["finalizers"] == [FINALIZER]
    (patch_request,) = [r for r in server.requests if r.method == "PATCH"]
    assert patch_request.content_type == "application/merge-patch+json"

    updated = await client.update({**patched, "spec": {"restartPolicy": "Never"}})
    assert updated["spec"] == {"restartPolicy": "Never"}

    await client.delete(POD)  # held by the finalizer
    assert (await client.get(POD))["metadata"]["deletionTimestamp"]


async def test_api_failures_arrive_as_sluice_errors(client, server):
    await client.create(pod())
    with pytest.raises(KubeAlreadyExistsError):
        await client.create(pod())
    stale = {"metadata": {"labels": {"b": "1"}, "resourceVersion": "0"}}
    with pytest.raises(KubeConflictError):
        await client.patch(POD, {"metadata": {"labels": {"a": "1"}}} | stale)
    with pytest.raises(KubeNotFoundError):
        await client.get(ObjectRef("v1", "Pod", "ns", "missing"))
    with pytest.raises(KubeInvalidError):
        await client.create(pod(name="Not_A_Name"))
    message = (
        'pods "p2" is forbidden: exceeded quota: q, requested: requests.cpu=8, '
        "used: requests.cpu=0, limited: requests.cpu=4"
    )
    server.kube.fail("create", translate_status(403, {"reason": "Forbidden", "message": message}))
    with pytest.raises(KubeQuotaExceededError) as caught:
        await client.create(pod(name="p2"))
    assert caught.value.requests_exceed_limits


async def test_list_and_watch(client):
    await client.create(pod("p1"))
    await client.create(pod("other", app="y"))
    listing = await client.list_objects(PODS, "ns", "app=x")
    assert [item["metadata"]["name"] for item in listing.items] == ["p1"]
    assert listing.items[0]["kind"] == "Pod"

    stream = client.watch(PODS, "ns", "app=x", listing.resource_version)
    await client.create(pod("p2"))
    event = await asyncio.wait_for(anext(stream), 10)
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "p2")
    await stream.aclose()


async def test_an_expired_watch_is_gone(client, server):
    await client.create(pod("p1"))
    await client.create(pod("p2"))
    server.kube.compact()
    with pytest.raises(KubeGoneError):
        await asyncio.wait_for(anext(client.watch(PODS, "ns", "", "1")), 10)


async def test_a_kind_the_cluster_does_not_serve_is_invalid(client):
    with pytest.raises(KubeInvalidError, match="does not serve"):
        await client.get(ObjectRef("ray.io/v1", "RayJob", "ns", "r"))


async def test_pod_plugin_end_to_end_over_http(client, server):
    manager = PluginManager("pod", PodPlugin(), client, KubePluginConfig(namespace="ns"))
    task = TaskSpec(name="t", version="1", type="container", custom={"image": "busybox"})
    ctx = FakeTaskContext(task=task, clock=FakeClock())
    try:
        assert (await manager.handle(ctx)).info.phase is Phase.QUEUED
        (ref,) = list(server.kube.objects)
        await asyncio.wait_for(ctx.refreshed.wait(), 10)  # the watch listed it
        ctx.refreshed.clear()
        server.kube.set_status(ref, {"phase": "Succeeded"})
        await asyncio.wait_for(ctx.refreshed.wait(), 10)  # ... and saw it change
        assert (await manager.handle(ctx)).info.phase is Phase.SUCCESS
        await manager.finalize(ctx)
        assert server.kube.objects == {}
    finally:
        await manager.close()


async def test_unreachable_cluster_and_bad_kubeconfig(tmp_path):
    config = ApiServer(FakeKubeClient(), url="http://127.0.0.1:1").kubeconfig()
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    with pytest.raises(KubeApiError, match="cannot reach"):
        await connect(str(path), discovery_cache=str(tmp_path / "d.json"))
    with pytest.raises(KubeApiError, match="configuration"):
        await connect(str(tmp_path / "missing"))


def test_translation_of_driver_exceptions():
    exc = ApiException(status=409, reason="Conflict")
    exc.body = json.dumps({"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
    assert isinstance(translate_exception(exc), KubeAlreadyExistsError)
    assert isinstance(translate_exception(ApiException(status=404, reason="x")), KubeNotFoundError)
    refused = aiohttp.ClientConnectionError("refused")
    assert type(translate_exception(refused)) is KubeApiError
    assert type(translate_exception(TimeoutError())) is KubeApiError
    assert translate_exception(ValueError("a bug")) is None
