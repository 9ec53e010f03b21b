"""Flytekit plugin task types that sluice runs on its own plugins: what each becomes.

- `ray` (flytekitplugins-ray) -> a sluice `ray` task: flyteidl's RayJob gives the head's and
  worker groups' sizes (`num-cpus` of their `ray_start_params`), the runtime environment and
  `shutdown_after_job_finishes`; the task's function runs through flytekit's entrypoint as the
  Ray job's driver (so flytekit's own `ray.init` joins the job's cluster).
- `dask` (flytekitplugins-dask) -> a sluice `dask` task: flyteidl's DaskJob gives the number
  of workers; the function runs through flytekit's entrypoint on a Dask worker.
- `raw-container` (flytekit's ContainerTask) -> a sluice `container` task (the pod plugin):
  image, command, args, env and resources; `{{.inputs.x}}` becomes sluice's `{{inputs.x}}`.

What Kubernetes alone gives (pod templates, images of the head, workers and scheduler, their
resources, autoscaling) has no meaning on a cluster sluice starts or is given, and is ignored;
the address of an existing cluster is the operator's (`plugins.config.ray.address`,
`plugins.config.dask.address`), as in Flyte where the platform, not the task, names it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from sluice.errors import DefinitionError

_FLYTE_INPUT = re.compile(r"\{\{\s*\.inputs\.(\w+)\s*\}\}")
_RESOURCE_NAMES = {"CPU": "cpu", "MEMORY": "memory", "GPU": "gpu", "EPHEMERAL_STORAGE": None}


def ray_custom(template: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """('ray', RayJobConfig fields) of a flytekitplugins-ray task template (as JSON)."""
    job = template.get("custom") or {}
    cluster = job.get("rayCluster") or {}
    head = cluster.get("headGroupSpec") or {}
    config: dict[str, Any] = {
        "worker_groups": [
            {
                "name": group.get("groupName") or "workers",
                "replicas": int(group.get("replicas", 0)),
                "cpus": _cpus(group.get("rayStartParams") or {}, 1, f"{where}: worker group"),
            }
            for group in cluster.get("workerGroupSpec") or []
        ],
        "runtime_env": _runtime_env(job, where),
        "shutdown_after_job": bool(job.get("shutdownAfterJobFinishes", False)),
    }
    if "num-cpus" in (head.get("rayStartParams") or {}):
        config["head_cpus"] = _cpus(head["rayStartParams"], 2, f"{where}: head")
    return "ray", config


def dask_custom(template: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """('dask', DaskJobConfig fields) of a flytekitplugins-dask task template (as JSON)."""
    workers = (template.get("custom") or {}).get("workers") or {}
    count = int(workers.get("numberOfWorkers", 0))
    return "dask", {"workers": count} if count > 0 else {}


def container_custom(template: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """('container', ContainerTask fields) of a flytekit ContainerTask template (as JSON)."""
    container = template.get("container") or {}
    outputs = sorted(((template.get("interface") or {}).get("outputs") or {}).get("variables", {}))
    if outputs:
        raise DefinitionError(
            f"{where}: a container task's outputs {outputs} are not supported yet (sluice's "
            "pod plugin reads no output files): declare none"
        )
    env = {pair["key"]: pair.get("value", "") for pair in container.get("env") or []}
    return "container", {
        "image": container.get("image", ""),
        "command": [_sluice_inputs(part) for part in container.get("command") or []],
        "args": [_sluice_inputs(part) for part in container.get("args") or []],
        "env": env,
        "resources": _resources(container.get("resources") or {}, where),
    }


PLUGIN_TASK_TYPES: dict[str, Callable[[dict[str, Any], str], tuple[str, dict[str, Any]]]] = {
    "ray": ray_custom,
    "dask": dask_custom,
    "raw-container": container_custom,
}
"""Flyte task type -> its translation to (sluice task type, that plugin's config)."""

PYTHON_FUNCTION_TYPES = ("python-task", "ray", "dask")
"""Task types whose template runs a python function through flytekit's entrypoint."""


def _cpus(params: dict[str, Any], default: int, where: str) -> int:
    value = params.get("num-cpus", default)
    try:
        cpus = int(float(value))
    except (TypeError, ValueError):
        raise DefinitionError(f"{where}: num-cpus must be a number, got {value!r}") from None
    if cpus < 1:
        raise DefinitionError(f"{where}: num-cpus must be at least 1, got {value!r}")
    return cpus


def _runtime_env(job: dict[str, Any], where: str) -> dict[str, Any]:
    """The job's runtime environment: its YAML form, else the older base64 JSON one."""
    if job.get("runtimeEnvYaml"):
        import yaml  # type: ignore[import-untyped]  # flytekit depends on PyYAML

        found = yaml.safe_load(job["runtimeEnvYaml"])
    elif job.get("runtimeEnv"):
        found = json.loads(base64.b64decode(job["runtimeEnv"]))
    else:
        return {}
    if not isinstance(found, dict):
        raise DefinitionError(f"{where}: runtime_env must be a mapping, got {found!r}")
    return found


def _sluice_inputs(text: str) -> str:
    return _FLYTE_INPUT.sub(lambda match: "{{inputs." + match.group(1) + "}}", text)


def _resources(resources: dict[str, Any], where: str) -> dict[str, Any]:
    """flyteidl Resources ({"requests": [{"name": "CPU", "value": "1"}]}) as the pod plugin's."""
    found: dict[str, Any] = {}
    for side in ("requests", "limits"):
        amounts: dict[str, Any] = {}
        for entry in resources.get(side) or []:
            name = entry.get("name", "UNKNOWN")
            if name not in _RESOURCE_NAMES:
                raise DefinitionError(f"{where}: resource {name!r} is not supported yet")
            key = _RESOURCE_NAMES[name] or "ephemeral_storage"
            amounts[key] = int(entry["value"]) if key == "gpu" else entry["value"]
        if amounts:
            found[side] = amounts
    return found
