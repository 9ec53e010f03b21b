"""A flytekit `map_task` (a flyteidl ArrayNode) -> a sluice map task (spec/compound.py).

flytekit serializes `map_task(t, concurrency=C, min_success_ratio=R)` as an ArrayNode around
a task node whose template is the "arraynode" task: `t`'s interface with every mapped input
and every output turned into a list (outputs Optional when R < 1), run by
`pyflyte-map-execute` through flytekit's ArrayNodeMapTaskResolver, whose arguments name the
bound inputs (`functools.partial`'s fixed ones) and `t`'s own resolver and arguments.

sluice runs the map as its own map node: each item is a child node running `t` itself (the
template rewritten for `pyflyte-execute` with `t`'s resolver, the list inputs taken item by
item, the bound ones as given), so each item has its own attempts, cache entry, quotas and
locks, as a Flyte array node's subnodes do. `parallelism` -> concurrency (0 or unset: no
bound of its own), `min_success_ratio` or `min_successes` -> how many items must succeed.
"""

from __future__ import annotations

import copy
from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.simple_tasks import sidecar_as_python_task
from sluice.flyte.tasks import MAP_RESOLVER, interface, task_spec
from sluice.spec.canonical import digest
from sluice.spec.compound import MAP_TYPE, MapOptions
from sluice.spec.models import TaskSpec

_EXECUTE = "pyflyte-execute"


def map_task_spec(node: Any, array_template: Any, root: str, file: str, where: str) -> TaskSpec:
    """The sluice map task of an array node whose task node runs `array_template`."""
    from google.protobuf import json_format

    array = node.array_node
    here = f"{where}: node {node.id!r} (map_task)"
    if array.node.WhichOneof("target") != "task_node":
        raise DefinitionError(f"{here}: only a map over a task is supported, not over a node")
    if not array_template.HasField("container") and array_template.HasField("k8s_pod"):
        array_template = sidecar_as_python_task(array_template, here)  # a map over a Pod task
    bound, inner_resolver, inner_args = _map_args(list(array_template.container.args), here)
    as_json = json_format.MessageToDict(array_template)
    # sorted: a protobuf map's order differs between processes, the spec must not
    mapped = sorted(n for n in array_template.interface.inputs.variables if n not in bound)
    if not mapped:
        raise DefinitionError(f"{here}: every input is bound; a map needs one list input")
    inner = task_spec(
        _item_template(array_template, as_json, mapped, inner_resolver, inner_args, here),
        root,
        file,
    )
    options = MapOptions(
        task=inner,
        item_input=mapped[0],
        zipped=tuple(mapped[1:]),
        concurrency=array.parallelism or None,
        min_success_ratio=_ratio(array),
        min_successes=array.min_successes if _criterion(array) == "min_successes" else None,
    )
    draft = TaskSpec(
        name=array_template.id.name,
        version="",
        type=MAP_TYPE,
        interface=interface(array_template.interface, here),
        custom=options.model_dump(mode="json"),
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})


def _criterion(array: Any) -> str | None:
    return str(array.WhichOneof("success_criteria") or "") or None


def _ratio(array: Any) -> float:
    """The ratio, rounded back from the proto's float32 (0.6 is stored as 0.6000000238...,
    which would ask for 4 of 5 items instead of 3)."""
    if _criterion(array) == "min_success_ratio":
        return round(float(array.min_success_ratio), 6)
    return 1.0


def _map_args(args: list[str], where: str) -> tuple[set[str], str, list[str]]:
    """The bound inputs, the mapped task's resolver and its arguments, from the arraynode
    task's `pyflyte-map-execute ... --resolver ArrayNodeMapTaskResolver -- vars A,B resolver
    R ARGS...` command line."""
    if "--" not in args or "--resolver" not in args:
        raise DefinitionError(f"{where}: not a flytekit map task command line: {args}")
    resolver = args[args.index("--resolver") + 1]
    if resolver != MAP_RESOLVER:
        raise DefinitionError(f"{where}: map task resolver {resolver!r} is not supported")
    tail = args[args.index("--") + 1 :]
    pairs = dict(zip(tail[:4:2], tail[1:4:2], strict=False))
    if list(pairs) != ["vars", "resolver"]:
        raise DefinitionError(f"{where}: unexpected map task arguments {tail[:4]}")
    bound = {v for v in pairs["vars"].split(",") if v}
    return bound, pairs["resolver"], tail[4:]


def _item_template(
    array_template: Any,
    as_json: dict[str, Any],
    mapped: list[str],
    resolver: str,
    args: list[str],
    where: str,
) -> Any:
    """The template of one item: the mapped task run by `pyflyte-execute`, its mapped inputs
    and its outputs the element types of the array task's lists."""
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    item = copy.deepcopy(as_json)
    name = _task_name(args, array_template.id.name)
    item["id"]["name"] = name
    variables = item.get("interface", {}).get("inputs", {}).get("variables", {})
    for input_name in mapped:
        variables[input_name]["type"] = _element(variables[input_name]["type"], where, input_name)
    outputs = item.get("interface", {}).get("outputs", {}).get("variables", {})
    for output_name, variable in outputs.items():
        variable["type"] = _element(variable["type"], where, output_name)
    original = list(array_template.container.args)
    head = original[: original.index("--resolver")]
    head[0] = _EXECUTE if head and head[0].startswith("pyflyte-") else head[0]
    item["container"]["args"] = [*head, "--resolver", resolver, "--", *args]
    return json_format.ParseDict(item, tasks_pb2.TaskTemplate())


def _element(literal_type: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    element = literal_type.get("collectionType")
    if element is None:
        raise DefinitionError(f"{where}: map task variable {name!r} is not a list")
    return dict(element)


def _task_name(args: list[str], fallback: str) -> str:
    """`module.task` from the mapped task's `task-module M task-name T` arguments."""
    pairs = dict(zip(args[::2], args[1::2], strict=False))
    module, task = pairs.get("task-module"), pairs.get("task-name")
    return f"{module}.{task}" if module and task else fallback
