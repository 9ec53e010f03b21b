"""Two Flyte task types that need no plugin of their own:

- `echo` (flytekit's `Echo` task, often an empty branch case): its output `o0` is its one
  input; sluice runs it on the python plugin as `ECHO`, which returns it. (An echo of
  several inputs is refused: flytekit pairs them with `o0`, `o1`... by the order of a Python
  dict, which the serialized interface, a protobuf map, does not keep.)
- `sidecar` (the legacy flytekitplugins-pod `Pod` task, and a `map_task` over one): a python
  function whose container sits in a pod spec (`k8s_pod`) instead of the template's
  `container`. What only Kubernetes gives (the other containers, volumes, node selectors) is
  ignored, as for a ray or dask task's pod templates: the primary container's command line,
  image and environment make it an ordinary `python-task`, run on the flyte plugin.
"""

from __future__ import annotations

import copy
from typing import Any

from sluice.errors import DefinitionError
from sluice.plugins.builtin.flyte_literals import type_spec
from sluice.spec.canonical import digest
from sluice.spec.models import InputSpec, Interface, SourceRef, TaskSpec

ECHO_TYPE = "echo"
SIDECAR_TYPE = "sidecar"
ECHO_REF = ("sluice.flyte.simple_tasks", "ECHO")
_PRIMARY = "primary_container_name"
_ECHOED = "o0"


def echo_task(template: Any, where: str) -> TaskSpec:
    """The python task that returns an echo task's one input as its output `o0`."""
    variables = template.interface.inputs.variables
    if len(variables) != 1 or list(template.interface.outputs.variables) != [_ECHOED]:
        raise DefinitionError(
            f"{where}: an echo task of {len(variables)} inputs is not supported (one input, "
            "echoed as o0)"
        )
    name, variable = next(iter(variables.items()))
    value = type_spec(variable.type, f"{where}: input {name!r}")
    module, qualname = ECHO_REF
    draft = TaskSpec(
        name=template.id.name,
        version="",
        type="python",
        interface=Interface(inputs={name: InputSpec(type=value)}, outputs={_ECHOED: value}),
        source=SourceRef(module=module, qualname=qualname),
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})


class _Echo:
    """What the python plugin runs for an echo task (it calls `execute_json`)."""

    def execute_json(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {_ECHOED: next(iter(inputs.values()))}


ECHO = _Echo()


def sidecar_as_python_task(template: Any, where: str) -> Any:
    """A `sidecar` template (or a map task's template over one) as the `python-task`
    template of its primary container; DefinitionError naming what is missing."""
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    if not template.HasField("k8s_pod"):
        raise DefinitionError(f"{where}: a sidecar task without a pod spec (k8s_pod)")
    pod = json_format.MessageToDict(template.k8s_pod.pod_spec)
    primary_name = dict(template.config).get(_PRIMARY, "primary")
    primary = next((c for c in pod.get("containers", []) if c.get("name") == primary_name), None)
    if primary is None or not primary.get("args"):
        raise DefinitionError(
            f"{where}: the pod spec has no primary container {primary_name!r} with a command line"
        )
    converted = copy.deepcopy(template)
    converted.ClearField("k8s_pod")
    if converted.type == SIDECAR_TYPE:
        converted.type = "python-task"
    converted.container.CopyFrom(
        tasks_pb2.Container(
            image=primary.get("image", ""),
            command=primary.get("command", []),
            args=primary["args"],
            env=[
                {"key": e["name"], "value": e.get("value", "")}
                for e in primary.get("env", [])
                if "name" in e
            ],
        )
    )
    return converted
