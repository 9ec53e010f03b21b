"""PluginManager over the in-memory Kubernetes API, driven through pod phases and API errors."""

from __future__ import annotations

import asyncio
import re

import pytest
from tests.plugins.k8s.helpers import calls, phase, the_pod_ref

from sluice.errors import PluginError
from sluice.plugins.builtin.pod import PodPlugin
from sluice.plugins.core.phase import ErrorKind, Phase
from sluice.plugins.k8s import (
    FINALIZER,
    K8sPluginProperties,
    KubeApiError,
    KubePluginConfig,
    PluginManager,
    translate_status,
)
from sluice.plugins.k8s.state import STATE_VERSION

QUOTA = (
    'pods "{name}" is forbidden: exceeded quota: compute, requested: limits.cpu={req}, '
    "used: limits.cpu={used}, limited: limits.cpu=4"
)


async def test_pod_lifecycle_create_run_succeed_and_clean_up(make_manager, make_ctx, kube):
    manager, ctx = make_manager(), make_ctx()
    first = await phase(manager, ctx)
    assert first.phase is Phase.QUEUED
    assert first.reason == "task submitted to Kubernetes"
    ref = the_pod_ref(kube)
    pod = kube.objects[ref]
    assert pod["metadata"]["finalizers"] == [FINALIZER]
    assert pod["metadata"]["labels"]["sluice.dev/execution-id"] == "xabc123"
    assert pod["metadata"]["labels"]["sluice.dev/attempt"] == "0"
    assert ctx.state_reader.get()["started"] is True

    kube.set_status(ref, {"phase": "Running"}, nodeName="node-1")
    assert (await phase(manager, ctx)).phase is Phase.RUNNING
    kube.set_status(ref, {"phase": "Succeeded"})
    assert (await phase(manager, ctx)).phase is Phase.SUCCESS

    await manager.finalize(ctx)
    assert ref not in kube.objects


async def test_already_exists_on_create_counts_as_created(make_manager, make_ctx, kube):
    """A crash after create and before the state was saved: the retry finds the object."""
    ctx = make_ctx()
    await make_manager().handle(ctx)
    ref = the_pod_ref(kube)
    ctx.state_writer.reset()  # as if the first evaluation's state was never saved

    info = await phase(make_manager(), ctx)

    assert info.phase is Phase.QUEUED
    assert calls(kube, "create") == 2
    assert list(kube.objects) == [ref]


async def test_a_restarted_manager_resumes_without_creating_twice(make_manager, make_ctx, kube):
    ctx = make_ctx()
    await make_manager().handle(ctx)
    ref = the_pod_ref(kube)
    kube.set_status(ref, {"phase": "Running"})

    info = await phase(make_manager(), ctx)  # a new engine process, same persisted state

    assert info.phase is Phase.RUNNING
    assert calls(kube, "create") == 1


async def test_quota_exceeded_waits_then_is_admitted(make_manager, make_ctx, kube):
    manager, ctx = make_manager(), make_ctx()
    kube.fail("create", translate_status(403, {"message": QUOTA.format(name="p", req=2, used=3)}))
    kube.fail("create", translate_status(403, {"message": QUOTA.format(name="p", req=2, used=3)}))
    kube.fail("create", translate_status(403, {"message": QUOTA.format(name="p", req=2, used=4)}))

    waits = [await phase(manager, ctx) for _ in range(3)]
    admitted = await phase(manager, ctx)

    assert all(w.phase is Phase.WAITING_FOR_RESOURCES for w in waits)
    assert waits[0].reason.startswith("Exceeded resourcequota: ")
    assert [w.version for w in waits] == [0, 0, 1]  # bumped only when the reason changed
    assert admitted.phase is Phase.QUEUED
    assert calls(kube, "create") == 4
    assert len(kube.only("Pod")) == 1


async def test_requests_above_the_quota_limit_fail_at_once(make_manager, make_ctx, kube):
    manager, ctx = make_manager(), make_ctx()
    kube.fail("create", translate_status(403, {"message": QUOTA.format(name="p", req=8, used=0)}))

    info = await phase(manager, ctx)

    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "ResourceRequestsExceedLimits"
    assert kube.only("Pod") == []


@pytest.mark.parametrize(
    ("status", "body", "expected_phase", "code", "kind"),
    [
        (
            403,
            {"message": "pods is forbidden: no RBAC"},
            Phase.RETRYABLE_FAILURE,
            "RuntimeFailure",
            ErrorKind.USER,
        ),
        (
            422,
            {"reason": "Invalid", "message": "spec.containers: Required value"},
            Phase.PERMANENT_FAILURE,
            "BadTaskFormat",
            ErrorKind.USER,
        ),
        (
            400,
            {"reason": "BadRequest", "message": "bad"},
            Phase.PERMANENT_FAILURE,
            "BadTaskFormat",
            ErrorKind.USER,
        ),
        (413, {"message": "too large"}, Phase.PERMANENT_FAILURE, "EntityTooLarge", ErrorKind.USER),
        (
            500,
            {"message": "etcd timeout"},
            Phase.RETRYABLE_FAILURE,
            "KubeApiError",
            ErrorKind.SYSTEM,
        ),
    ],
)
async def test_create_errors_map_to_phases(
    make_manager, make_ctx, kube, status, body, expected_phase, code, kind
):
    manager, ctx = make_manager(), make_ctx()
    kube.fail("create", translate_status(status, body))

    info = await phase(manager, ctx)

    assert info.phase is expected_phase
    assert info.error is not None
    assert (info.error.code, info.error.kind) == (code, kind)
    assert ctx.state_reader.get()["started"] is False


async def test_a_bad_task_spec_fails_permanently_without_a_call(make_manager, make_ctx, kube):
    manager = make_manager()
    ctx = make_ctx(task=make_ctx().task.model_copy(update={"custom": {"command": ["x"]}}))

    info = await phase(manager, ctx)

    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert info.error.code == "FailedToBuildResource"
    assert "custom.image" in info.error.message
    assert calls(kube, "create") == 0


async def test_pod_deleted_externally_is_a_retryable_system_failure(make_manager, make_ctx, kube):
    manager, ctx = make_manager(watch=False), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.objects[ref]["metadata"]["finalizers"] = []  # someone strips it and deletes the pod
    await kube.delete(ref)

    info = await phase(manager, ctx)

    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert (info.error.code, info.error.kind) == ("ResourceDeletedExternally", ErrorKind.SYSTEM)
    await manager.finalize(ctx)  # nothing left to clean: still fine


async def test_a_running_pod_being_deleted_fails_and_is_released(make_manager, make_ctx, kube):
    manager, ctx = make_manager(watch=False), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.set_status(ref, {"phase": "Running"})
    await kube.delete(ref)  # held by our finalizer: deletionTimestamp set, pod still there

    info = await phase(manager, ctx)
    assert info.error is not None
    assert info.error.code == "UnexpectedObjectDeletion"
    assert ref in kube.objects

    await manager.finalize(ctx)
    assert ref not in kube.objects  # our finalizer no longer holds it


async def test_a_read_error_fails_the_attempt_and_cleans_up_even_if_pods_are_kept(
    make_manager, make_ctx, kube
):
    manager, ctx = make_manager(watch=False, delete_resource_on_finalize=False), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    kube.fail("get", KubeApiError("connection reset"))

    info = await phase(manager, ctx)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.cleanup_on_failure

    await manager.finalize(ctx)
    assert ref not in kube.objects  # the pod may still run: never left behind


async def test_watch_refreshes_the_task_and_serves_reads(make_manager, make_ctx, kube):
    manager, ctx = make_manager(), make_ctx()
    await manager.handle(ctx)
    ref = the_pod_ref(kube)
    await asyncio.wait_for(ctx.refreshed.wait(), 10)  # the watch has listed the new pod
    ctx.refreshed.clear()

    kube.set_status(ref, {"phase": "Running"})
    await asyncio.wait_for(ctx.refreshed.wait(), 10)
    gets_before = calls(kube, "get")
    info = await phase(manager, ctx)

    assert info.phase is Phase.RUNNING
    assert calls(kube, "get") == gets_before  # read from the watch cache, not the API


async def test_without_watch_reads_go_to_the_api(make_manager, make_ctx, kube):
    manager, ctx = make_manager(watch=False), make_ctx()
    await manager.handle(ctx)
    await manager.handle(ctx)
    assert calls(kube, "get") == 1
    assert calls(kube, "watch") == 0


async def test_a_corrupted_state_is_a_retryable_system_failure(make_manager, make_ctx):
    ctx = make_ctx()
    ctx.state_writer.put(STATE_VERSION + 1, {"started": True})

    info = await phase(make_manager(), ctx)

    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert info.error.code == "CorruptedPluginState"


async def test_object_names_are_dns1123_and_fitted(make_manager, make_ctx, kube):
    ctx = make_ctx(execution_id="X" * 40 + "_Ünï", node_id="Node.Of.Some_Sort", attempt=3)
    await make_manager().handle(ctx)
    ref = the_pod_ref(kube)

    assert len(ref.name) <= 50
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", ref.name)
    other = make_ctx(execution_id="X" * 40 + "_Ünï", node_id="Node.Of.Some_Sort", attempt=4)
    await make_manager().handle(other)
    assert len(kube.only("Pod")) == 2  # the next attempt gets its own name
    labels = kube.objects[ref]["metadata"]["labels"]
    assert all(
        re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", v) for v in labels.values()
    )


class ShortNamePlugin(PodPlugin):
    def __init__(self, length: int) -> None:
        super().__init__()
        self._length = length

    @property
    def properties(self) -> K8sPluginProperties:
        return K8sPluginProperties(generated_name_max_length=self._length)


async def test_names_fit_the_plugins_max_length(make_manager, make_ctx, kube):
    manager = make_manager(ShortNamePlugin(20))
    assert manager.properties.generated_name_max_length == 20
    await manager.handle(make_ctx())
    assert len(the_pod_ref(kube).name) <= 20


@pytest.mark.parametrize("length", [7, 64])
def test_a_max_length_out_of_range_is_refused(kube, length):
    with pytest.raises(PluginError, match="generated_name_max_length"):
        PluginManager("pod", ShortNamePlugin(length), kube, KubePluginConfig())


async def test_namespace_template_and_owner_reference(make_manager, make_ctx, kube):
    owner = {"api_version": "apps/v1", "kind": "Deployment", "name": "sluice", "uid": "u-1"}
    manager = make_manager(namespace="{project}-{domain}", owner_reference=owner)
    await manager.handle(make_ctx())
    ref = the_pod_ref(kube)

    assert ref.namespace == "flights-dev"
    (reference,) = kube.objects[ref]["metadata"]["ownerReferences"]
    assert (reference["kind"], reference["uid"]) == ("Deployment", "u-1")


async def test_finalizer_can_be_disabled_by_config(make_manager, make_ctx, kube):
    await make_manager(inject_finalizer=False).handle(make_ctx())
    assert "finalizers" not in kube.objects[the_pod_ref(kube)]["metadata"]
