"""PluginManager clean-up: abort, abort overrides, finalizer removal with back-off, deletion."""

from __future__ import annotations

from typing import Any

import pytest
from tests.plugins.k8s.helpers import calls, the_pod_ref

from sluice.plugins.builtin.pod import PodPlugin
from sluice.plugins.k8s import (
    FINALIZER,
    AbortBehavior,
    K8sPluginProperties,
    KubeConflictError,
    ObjectRef,
    translate_status,
)
from sluice.plugins.k8s.testing import FakeKubeClient


class KeptPodPlugin(PodPlugin):
    @property
    def properties(self) -> K8sPluginProperties:
        return K8sPluginProperties(disable_delete_resource_on_finalize=True)


async def test_finalize_backs_off_on_conflict_then_succeeds(make_manager, make_ctx, kube, clock):
    manager, ctx = make_manager(watch=False), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.set_status(ref, {"phase": "Succeeded"})
    await manager.handle(ctx)
    racer = RacingPatches(kube, ref, races=2)

    await manager.finalize(ctx)

    assert racer.conflicts == 2
    assert ref not in kube.objects
    assert len(clock.sleeps) == 2
    assert 0.01 <= clock.sleeps[0] <= 0.011
    assert 0.02 <= clock.sleeps[1] <= 0.022


async def test_finalize_gives_up_after_the_configured_retries(make_manager, make_ctx, kube, clock):
    manager, ctx = make_manager(watch=False, finalizer_backoff={"retries": 3}), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    RacingPatches(kube, ref, races=10)

    with pytest.raises(KubeConflictError):
        await manager.finalize(ctx)
    assert len(clock.sleeps) == 3
    assert FINALIZER in kube.objects[ref]["metadata"]["finalizers"]


class RacingPatches:
    """Someone else changes the pod between our read and our patch, `races` times."""

    def __init__(self, kube: FakeKubeClient, ref: ObjectRef, races: int) -> None:
        self.conflicts, self._races = 0, races
        original = kube.patch

        async def patch(target: ObjectRef, body: dict[str, Any]) -> dict[str, Any]:
            if self._races:
                self._races -= 1
                kube.set_status(ref, {"phase": "Succeeded", "message": f"race {self._races}"})
            try:
                return await original(target, body)
            except KubeConflictError:
                self.conflicts += 1
                raise

        kube.patch = patch  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "make", [lambda m: m(delete_resource_on_finalize=False), lambda m: m(KeptPodPlugin())]
)
async def test_finalize_keeps_finished_pods_when_deletion_is_disabled(
    make_manager, make_ctx, kube, make
):
    manager, ctx = make(make_manager), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.set_status(ref, {"phase": "Succeeded"})
    await manager.handle(ctx)

    await manager.finalize(ctx)

    assert kube.objects[ref]["metadata"]["finalizers"] == []
    assert "deletionTimestamp" not in kube.objects[ref]["metadata"]


async def test_finalize_deletes_an_unfinished_pod_even_when_pods_are_kept(
    make_manager, make_ctx, kube
):
    manager, ctx = make_manager(delete_resource_on_finalize=False), make_ctx()
    await manager.handle(ctx)  # queued, then the engine gives up on it (timeout)
    ref = the_pod_ref(kube)

    await manager.finalize(ctx)

    assert ref not in kube.objects


async def test_abort_deletes_the_pod_and_finalize_releases_it(make_manager, make_ctx, kube):
    manager, ctx = make_manager(), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)

    await manager.abort(ctx)
    assert kube.objects[ref]["metadata"]["deletionTimestamp"]
    await manager.abort(ctx)  # idempotent
    await manager.finalize(ctx)

    assert ref not in kube.objects


async def test_abort_deletes_a_pod_whose_creation_was_never_recorded(make_manager, make_ctx, kube):
    ctx = make_ctx()
    await make_manager(inject_finalizer=False).handle(ctx)
    ctx.state_writer.reset()  # crashed before saving: the state says NotStarted

    await make_manager().abort(ctx)

    assert kube.only("Pod") == []


async def test_abort_of_a_missing_pod_is_fine(make_manager, make_ctx, kube):
    await make_manager().abort(make_ctx())
    assert calls(kube, "delete") == 1


class SuspendOnAbort(PodPlugin):
    def __init__(self, delete_on_error: bool = False) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []
        self.delete_on_error = delete_on_error

    async def on_abort(self, ctx: Any, resource: dict[str, Any]) -> AbortBehavior:
        self.seen.append(resource)
        patch = {"metadata": {"annotations": {"example.com/suspend": "true"}}}
        return AbortBehavior.patch_resource(patch, delete_on_error=self.delete_on_error)


async def test_abort_override_patches_instead_of_deleting(make_manager, make_ctx, kube):
    plugin = SuspendOnAbort()
    manager, ctx = make_manager(plugin), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)

    await manager.abort(ctx)

    assert plugin.seen[0]["metadata"] == {"name": ref.name, "namespace": ref.namespace}
    assert kube.objects[ref]["metadata"]["annotations"]["example.com/suspend"] == "true"
    assert "deletionTimestamp" not in kube.objects[ref]["metadata"]


async def test_abort_override_falls_back_to_delete_when_the_patch_fails(
    make_manager, make_ctx, kube
):
    manager, ctx = make_manager(SuspendOnAbort(delete_on_error=True)), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.fail("patch", translate_status(422, {"message": "no such field"}))

    await manager.abort(ctx)

    assert kube.objects[ref]["metadata"]["deletionTimestamp"]
