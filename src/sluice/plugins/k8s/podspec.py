"""Build a pod spec from a container task: image, command, env, requests and limits, GPUs.

The task's part (`ContainerTask`, from `TaskSpec.custom`) says what to run; the operator's
part (`PodSettings`, from the plugin config) says how the cluster names GPUs and nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.k8s.objects import Manifest
from sluice.plugins.k8s.quantity import parse_quantity
from sluice.spec.models import TaskSpec

PRIMARY_CONTAINER = "main"
_INPUT_REFERENCE = re.compile(r"\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use


class ResourceAmounts(_Model):
    cpu: str | None = None
    memory: str | None = None
    ephemeral_storage: str | None = None
    gpu: int | None = Field(default=None, ge=0)

    @field_validator("cpu", "memory", "ephemeral_storage", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str | None:
        if value is None:
            return None
        parse_quantity(value)  # raises ValueError with an example of the format
        return str(value)

    def quantities(self) -> dict[str, str]:
        amounts = {
            "cpu": self.cpu,
            "memory": self.memory,
            "ephemeral-storage": self.ephemeral_storage,
        }
        return {name: amount for name, amount in amounts.items() if amount is not None}


class Resources(_Model):
    requests: ResourceAmounts = Field(default_factory=ResourceAmounts)
    limits: ResourceAmounts = Field(default_factory=ResourceAmounts)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        limits = self.limits.quantities()
        for name, amount in self.requests.quantities().items():
            if name in limits and parse_quantity(amount) > parse_quantity(limits[name]):
                raise ValueError(f"{name} request {amount} is above its limit {limits[name]}")
        gpus = {self.requests.gpu, self.limits.gpu} - {None}
        if len(gpus) > 1:
            raise ValueError("gpu requests and limits must be equal (an extended resource)")
        return self

    @property
    def gpu(self) -> int | None:
        return self.limits.gpu if self.limits.gpu is not None else self.requests.gpu


class Accelerator(_Model):
    device: str = Field(min_length=1)
    """The node label value, e.g. "nvidia-tesla-t4"."""
    partition_size: str | None = None
    """A MIG partition, e.g. "1g.5gb"."""

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"device": value} if isinstance(value, str) else value


class ContainerTask(_Model):
    """`TaskSpec.custom` of a container task."""

    image: str = Field(min_length=1)
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    accelerator: Accelerator | None = None
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    service_account: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_task(cls, task: TaskSpec) -> ContainerTask:
        try:
            return cls.model_validate(task.custom)
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error["loc"])
            raise InvalidPluginConfigError(
                f"task {task.name!r}: custom.{key}: {error['msg']}"
            ) from None

    @property
    def gpu_count(self) -> int:
        """GPUs to ask for: as set in resources, else 1 when an accelerator is named."""
        count = self.resources.gpu
        return count if count is not None else (1 if self.accelerator else 0)


class PodSettings(_Model):
    """Operator settings of pods (defaults as Flyte's)."""

    gpu_device_node_label: str = "k8s.amazonaws.com/accelerator"
    gpu_partition_size_node_label: str = "k8s.amazonaws.com/gpu-partition-size"
    gpu_resource_name: str = "nvidia.com/gpu"
    resource_tolerations: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    """Tolerations added when a pod asks for a resource, e.g. {"nvidia.com/gpu": [...]}."""
    default_node_selector: dict[str, str] = Field(default_factory=dict)
    default_tolerations: list[dict[str, Any]] = Field(default_factory=list)
    image_pull_grace_period: float = Field(default=180.0, ge=0)
    """Seconds an image pull may fail before the task fails."""


def build_pod_spec(
    task: ContainerTask,
    metadata: TaskExecutionMetadata,
    settings: PodSettings,
    inputs: Mapping[str, Any] | None = None,
) -> Manifest:
    """A pod spec that runs the task once (restartPolicy Never) in container "main"."""
    container = build_container(task, metadata, settings, inputs or {})
    spec: Manifest = {"restartPolicy": "Never", "containers": [container]}
    node_selector = {**settings.default_node_selector, **task.node_selector}
    node_selector.update(gpu_node_selector(task, settings))
    tolerations = [*settings.default_tolerations, *task.tolerations]
    tolerations += _resource_tolerations(container["resources"], settings)
    optional = {
        "nodeSelector": node_selector,
        "tolerations": tolerations,
        "serviceAccountName": task.service_account,
    }
    spec.update({key: value for key, value in optional.items() if value})
    return spec


def build_container(
    task: ContainerTask,
    metadata: TaskExecutionMetadata,
    settings: PodSettings,
    inputs: Mapping[str, Any],
) -> Manifest:
    container: Manifest = {
        "name": PRIMARY_CONTAINER,
        "image": task.image,
        "env": container_env(task.env, metadata),
        "resources": resource_requirements(task, settings),
    }
    if task.command:
        container["command"] = [render_inputs(part, inputs) for part in task.command]
    if task.args:
        container["args"] = [render_inputs(part, inputs) for part in task.args]
    if task.image_pull_policy:
        container["imagePullPolicy"] = task.image_pull_policy
    return container


def container_env(task_env: Mapping[str, str], metadata: TaskExecutionMetadata) -> list[Manifest]:
    """The task's env, overridden by the execution's environment, then sluice's identity
    variables (SLUICE_EXECUTION_ID, ...), which always hold the true values."""
    merged = {**task_env, **metadata.environment, **identity_env(metadata)}
    return [{"name": name, "value": str(value)} for name, value in merged.items()]


def identity_env(metadata: TaskExecutionMetadata) -> dict[str, str]:
    return {
        "SLUICE_EXECUTION_ID": metadata.execution_id,
        "SLUICE_PROJECT": metadata.project,
        "SLUICE_DOMAIN": metadata.domain,
        "SLUICE_NODE_ID": metadata.node_id,
        "SLUICE_TASK_NAME": metadata.task_name,
        "SLUICE_ATTEMPT": str(metadata.attempt),
    }


def resource_requirements(task: ContainerTask, settings: PodSettings) -> Manifest:
    """Requests and limits; a missing limit is the request (as Flyte does: the pod gets what
    it asked for and no more) and a missing request is the limit (as Kubernetes does)."""
    requests, limits = task.resources.requests.quantities(), task.resources.limits.quantities()
    limits = {**requests, **limits}
    requests = {**limits, **requests}
    if task.gpu_count:
        requests[settings.gpu_resource_name] = limits[settings.gpu_resource_name] = str(
            task.gpu_count
        )
    result: Manifest = {}
    if requests:
        result["requests"] = requests
    if limits:
        result["limits"] = limits
    return result


def gpu_node_selector(task: ContainerTask, settings: PodSettings) -> dict[str, str]:
    """The node labels that pick the task's accelerator (none without GPUs)."""
    if task.accelerator is None or not task.gpu_count:
        return {}
    selector = {settings.gpu_device_node_label: task.accelerator.device}
    if task.accelerator.partition_size:
        selector[settings.gpu_partition_size_node_label] = task.accelerator.partition_size
    return selector


def _resource_tolerations(resources: Manifest, settings: PodSettings) -> list[dict[str, Any]]:
    asked = {**resources.get("requests", {}), **resources.get("limits", {})}
    return [
        toleration
        for name, tolerations in settings.resource_tolerations.items()
        if name in asked
        for toleration in tolerations
    ]


def render_inputs(text: str, inputs: Mapping[str, Any]) -> str:
    """Replace each {{inputs.NAME}} with the input's value: strings as they are, anything
    else as compact JSON."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in inputs:
            raise InvalidPluginConfigError(f"{text!r} refers to an unknown input {name!r}")
        found = inputs[name]
        if isinstance(found, str):
            return found
        return json.dumps(found, separators=(",", ":"), sort_keys=True)

    return _INPUT_REFERENCE.sub(value, text)
