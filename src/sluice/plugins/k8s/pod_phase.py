"""A pod's status read as a task phase, with the reason a user needs to see.

Pending is split by why it is pending: not schedulable (QUEUED with the scheduler's message,
not RUNNING: upstream #6417), containers being created or images pulled (INITIALIZING), or
an image that can never be pulled (failure). Failed says which container failed and how
(OOMKilled, exit code); an evicted or shut-down node is a system failure, not the user's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sluice.plugins.core.phase import ErrorKind, PhaseInfo, TaskInfo
from sluice.plugins.k8s.objects import Manifest, meta

NEVER_PULLABLE = frozenset({"InvalidImageName", "ErrImageNeverPull"})
"""Waiting reasons no amount of waiting fixes."""
FAIL_AFTER_GRACE = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "CreateContainerError"}
)
"""Waiting reasons that may clear (a registry hiccup, a secret created late), for a while."""
INTERRUPTIONS = frozenset(
    {
        "Evicted",
        "Preempting",
        "Shutdown",
        "NodeShutdown",
        "Terminated",
        "NodeLost",
        "UnexpectedAdmissionError",
    }
)
"""Pod failure reasons that come from the cluster, not from the task."""


def pod_phase_info(
    pod: Manifest,
    now: float,
    *,
    primary_container: str = "",
    image_pull_grace_period: float = 180.0,
) -> PhaseInfo:
    """The task phase for `pod` at time `now` (seconds since the epoch)."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    info = _task_info(pod, now)
    if phase == "Succeeded":
        return PhaseInfo.success(info)
    if phase == "Failed":
        return failed_phase(status, primary_container, info)
    if phase == "Running":
        return PhaseInfo.running(reason="pod running", info=info)
    if phase == "Unknown":
        return PhaseInfo.running(reason="pod status Unknown: its node is not reporting", info=info)
    age = now - _created_at(pod, now)
    return pending_phase(status, age, image_pull_grace_period, info)


def pending_phase(
    status: dict[str, Any], age: float, grace_period: float, info: TaskInfo
) -> PhaseInfo:
    scheduled = _condition(status, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        reason = scheduled.get("reason") or "Unschedulable"
        return PhaseInfo.queued(reason=_join(reason, scheduled.get("message")), info=info)
    for name, waiting in _waiting_containers(status):
        reason = waiting.get("reason") or "Waiting"
        message = f"container {name}: {_join(reason, waiting.get('message'))}"
        if reason in NEVER_PULLABLE:
            return PhaseInfo.permanent_failure(reason, message, info=info)
        if reason in FAIL_AFTER_GRACE and age > grace_period:
            return PhaseInfo.retryable_failure(reason, message, info=info)
        return PhaseInfo.initializing(reason=message, info=info)
    if scheduled is not None and scheduled.get("status") == "True":
        return PhaseInfo.initializing(reason="pod scheduled, starting containers", info=info)
    return PhaseInfo.queued(reason="pod pending", info=info)


def failed_phase(status: dict[str, Any], primary_container: str, info: TaskInfo) -> PhaseInfo:
    reason, message = status.get("reason") or "", status.get("message") or ""
    if reason in INTERRUPTIONS:
        return PhaseInfo.retryable_failure(
            reason, _join(f"pod {reason}", message), ErrorKind.SYSTEM, info
        )
    if reason == "DeadlineExceeded":
        return PhaseInfo.retryable_failure(
            reason, _join("pod deadline exceeded", message), info=info
        )
    found = _failed_container(status, primary_container)
    if found is None:
        return PhaseInfo.retryable_failure(
            reason or "PodFailed", message or "pod failed", info=info
        )
    name, terminated = found
    code = terminated.get("reason") or "Error"
    text = f"container {name} exited with code {terminated.get('exitCode')} ({code})"
    return PhaseInfo.retryable_failure(code, _join(text, terminated.get("message")), info=info)


def _failed_container(status: dict[str, Any], primary: str) -> tuple[str, dict[str, Any]] | None:
    """The primary container's termination, else the first that exited non-zero, else any."""
    terminated = [
        (name, state["terminated"])
        for name, state in _container_states(status)
        if state.get("terminated")
    ]
    for name, state in terminated:
        if name == primary:
            return name, state
    failing = [item for item in terminated if item[1].get("exitCode") not in (0, None)]
    candidates = failing or terminated
    return candidates[0] if candidates else None


def _waiting_containers(status: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, state["waiting"])
        for name, state in _container_states(status)
        if state.get("waiting")
    ]


def _container_states(status: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    statuses = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    return [(item.get("name", ""), item.get("state") or {}) for item in statuses]


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _created_at(pod: Manifest, default: float) -> float:
    stamp = meta(pod).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else default
    except ValueError:
        return default


def _join(head: str, detail: Any) -> str:
    return f"{head}: {detail}" if detail else head


def _task_info(pod: Manifest, now: float) -> TaskInfo:
    metadata = meta(pod)
    custom = {"pod": metadata.get("name", ""), "namespace": metadata.get("namespace", "")}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        custom["node"] = node
    return TaskInfo(occurred_at=now, external_id=str(metadata.get("name", "")), custom_info=custom)
