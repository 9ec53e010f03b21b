"""The in-memory Kubernetes API keeps the semantics the plugin machinery relies on."""

from __future__ import annotations

import pytest

from sluice.plugins.k8s import (
    KindRef,
    KubeAlreadyExistsError,
    KubeConflictError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
    ObjectRef,
)
from sluice.plugins.k8s.testing import FakeKubeClient

POD = ObjectRef("v1", "Pod", "ns", "p1")


def pod(name: str = "p1", finalizers: list[str] | None = None) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "namespace": "ns"}
    if finalizers is not None:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


async def test_create_sets_version_and_refuses_duplicates_and_bad_names():
    kube = FakeKubeClient()
    created = await kube.create(pod())
    assert created["metadata"]["resourceVersion"] == "1"
    with pytest.raises(KubeAlreadyExistsError):
        await kube.create(pod())
    with pytest.raises(KubeInvalidError):
        await kube.create(pod(name="Bad_Name"))


async def test_finalizers_hold_a_deleted_object_until_removed():
    kube = FakeKubeClient()
    await kube.create(pod(finalizers=["a", "b"]))
    await kube.delete(POD)
    assert (await kube.get(POD))["metadata"]["deletionTimestamp"]

    await kube.patch(POD, {"metadata": {"finalizers": ["b"]}})
    assert POD in kube.objects
    await kube.patch(POD, {"metadata": {"finalizers": []}})
    assert POD not in kube.objects
    with pytest.raises(KubeNotFoundError):
        await kube.delete(POD)


async def test_resource_version_is_a_precondition():
    kube = FakeKubeClient()
    first = await kube.create(pod())
    kube.set_status(POD, {"phase": "Running"})
    stale = {
        "metadata": {"labels": {"x": "1"}, "resourceVersion": first["metadata"]["resourceVersion"]}
    }
    with pytest.raises(KubeConflictError):
        await kube.patch(POD, stale)
    with pytest.raises(KubeConflictError):
        await kube.update({**first, "spec": {"x": 1}})
    current = await kube.get(POD)
    updated = await kube.update({**current, "spec": {"x": 1}})
    assert updated["spec"] == {"x": 1}


async def test_watch_replays_from_a_version_and_is_gone_after_compaction():
    kube = FakeKubeClient()
    await kube.create(pod("p1"))
    listing = await kube.list_objects(KindRef("v1", "Pod"), "ns")
    await kube.create(pod("p2"))
    stream = kube.watch(KindRef("v1", "Pod"), "ns", resource_version=listing.resource_version)
    event = await anext(stream)
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "p2")
    await stream.aclose()

    kube.compact()
    with pytest.raises(KubeGoneError):
        await anext(kube.watch(KindRef("v1", "Pod"), "ns", resource_version="1"))
