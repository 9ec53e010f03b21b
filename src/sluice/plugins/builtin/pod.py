"""The `pod` plugin: a task of type "container" runs as one Kubernetes Pod.

Task config (`custom`), see `ContainerTask`::

    {"image": "python:3.11-slim", "command": ["python", "-c"],
     "args": ["print({{inputs.n}} * 2)"], "env": {"MODE": "fast"},
     "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                   "limits": {"memory": "2Gi", "gpu": 1}},
     "accelerator": "nvidia-tesla-t4", "tolerations": [], "node_selector": {},
     "service_account": null, "image_pull_policy": null, "labels": {}, "annotations": {}}

`{{inputs.NAME}}` in command and args is replaced by the input's value (strings as they
are, anything else as JSON). The pod produces no outputs: a container task must declare none
(it fails at its first evaluation otherwise). Operator settings are `plugins.config.pod`
(`PodPluginConfig`: namespace, finalizer, clean-up, GPU labels, kube connection).
"""

from __future__ import annotations

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.context import SetupContext, TaskExecutionContext, TaskExecutionMetadata
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.k8s.config import KubePluginConfig
from sluice.plugins.k8s.loader import k8s_plugin_entry
from sluice.plugins.k8s.objects import Manifest
from sluice.plugins.k8s.plugin import K8sPluginProperties
from sluice.plugins.k8s.pod_phase import pod_phase_info
from sluice.plugins.k8s.podspec import PRIMARY_CONTAINER, ContainerTask, PodSettings, build_pod_spec
from sluice.spec.models import TaskSpec

PLUGIN_ID = "pod"
TASK_TYPES = ("container",)
_POD = {"apiVersion": "v1", "kind": "Pod"}


class PodPluginConfig(KubePluginConfig, PodSettings):
    """`plugins.config.pod`: the Kubernetes settings and the pod settings, flat."""


class PodPlugin:
    """Builds the task's Pod and reads its phase; the PluginManager does everything else."""

    def __init__(self, settings: PodSettings | None = None) -> None:
        self._settings = settings or PodSettings()

    @property
    def properties(self) -> K8sPluginProperties:
        return K8sPluginProperties()

    def validate_task(self, task: TaskSpec) -> None:
        ContainerTask.from_task(task)

    def build_identity_resource(self, metadata: TaskExecutionMetadata) -> Manifest:
        return dict(_POD)

    async def build_resource(self, ctx: TaskExecutionContext) -> Manifest:
        task = ContainerTask.from_task(ctx.task)
        if ctx.task.interface.outputs:
            raise InvalidPluginConfigError(
                f"container task {ctx.task.name!r} declares outputs "
                f"{sorted(ctx.task.interface.outputs)}, but a pod produces none"
            )
        spec = build_pod_spec(task, ctx.metadata, self._settings, ctx.inputs)
        metadata = {"labels": dict(task.labels), "annotations": dict(task.annotations)}
        return {**_POD, "metadata": metadata, "spec": spec}

    def get_task_phase(self, ctx: TaskExecutionContext, resource: Manifest) -> PhaseInfo:
        return pod_phase_info(
            resource,
            ctx.clock.now(),
            primary_container=PRIMARY_CONTAINER,
            image_pull_grace_period=self._settings.image_pull_grace_period,
        )


def _build(setup: SetupContext, config: PodPluginConfig) -> PodPlugin:
    return PodPlugin(config)


ENTRY = k8s_plugin_entry(PLUGIN_ID, TASK_TYPES, _build, PodPluginConfig)
