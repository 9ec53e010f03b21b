"""Pod status to task phase."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.plugins.core.phase import ErrorKind, Phase
from sluice.plugins.k8s import pod_phase_info

CREATED = "2024-01-01T00:00:00Z"
T0 = 1_704_067_200.0  # CREATED as epoch seconds


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "ns", "creationTimestamp": CREATED},
        "spec": {"nodeName": "node-7"},
        "status": status,
    }


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    state = {"waiting": {"reason": reason, "message": message}}
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "main", "state": state}],
    }


def test_unschedulable_pod_is_queued_with_the_schedulers_reason():
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    info = pod_phase_info(pod({"phase": "Pending", "conditions": [condition]}), T0)
    assert info.phase is Phase.QUEUED
    assert info.reason == f"Unschedulable: {message}"


def test_pending_without_conditions_is_queued():
    assert pod_phase_info(pod({}), T0).phase is Phase.QUEUED


def test_container_creating_is_initializing():
    info = pod_phase_info(pod(waiting("ContainerCreating")), T0)
    assert info.phase is Phase.INITIALIZING
    assert info.reason == "container main: ContainerCreating"


def test_image_pull_backoff_waits_for_the_grace_period_then_fails():
    status = waiting("ImagePullBackOff", "Back-off pulling image")
    early = pod_phase_info(pod(status), T0 + 60, image_pull_grace_period=180)
    late = pod_phase_info(pod(status), T0 + 181, image_pull_grace_period=180)
    assert early.phase is Phase.INITIALIZING
    assert late.phase is Phase.RETRYABLE_FAILURE
    assert late.error is not None
    assert late.error.code == "ImagePullBackOff"


def test_invalid_image_name_fails_permanently_at_once():
    info = pod_phase_info(pod(waiting("InvalidImageName", "bad ref")), T0)
    assert info.phase is Phase.PERMANENT_FAILURE


def test_running_and_succeeded():
    running = pod_phase_info(pod({"phase": "Running"}), T0)
    assert running.phase is Phase.RUNNING
    assert running.info is not None
    assert running.info.custom_info["node"] == "node-7"
    assert pod_phase_info(pod({"phase": "Succeeded"}), T0).phase is Phase.SUCCESS


def test_oom_killed_container_is_a_retryable_failure_with_exit_code():
    terminated = {"reason": "OOMKilled", "exitCode": 137}
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "sidecar", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
            {"name": "main", "state": {"terminated": terminated}},
        ],
    }
    info = pod_phase_info(pod(status), T0, primary_container="main")
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert (info.error.code, info.error.kind) == ("OOMKilled", ErrorKind.USER)
    assert "exited with code 137" in info.error.message


def test_without_a_primary_the_failing_container_is_reported():
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "a", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
            {"name": "b", "state": {"terminated": {"reason": "Error", "exitCode": 2}}},
        ],
    }
    info = pod_phase_info(pod(status), T0)
    assert info.error is not None
    assert "container b exited with code 2" in info.error.message


@pytest.mark.parametrize("reason", ["Evicted", "NodeShutdown", "Terminated"])
def test_cluster_interruptions_are_system_failures(reason):
    info = pod_phase_info(pod({"phase": "Failed", "reason": reason, "message": "m"}), T0)
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.error is not None
    assert (info.error.code, info.error.kind) == (reason, ErrorKind.SYSTEM)
