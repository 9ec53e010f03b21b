"""A flyteidl task template -> a sluice TaskSpec: `python-task` (the `flyte` plugin), or a
flytekit plugin task type sluice has a plugin for (`ray`, `dask`, `raw-container`: see
plugin_tasks).

Metadata maps one to one: retries, timeout, interruptible; `discoverable` and
`discovery_version` -> the cache and its version; `cache_serializable` -> a serialized
reservation; `cache_ignore_input_vars` -> ignored inputs. The template itself (as JSON) and
the directory its module imports from travel in `custom` (under `flyte` for a ray or dask
task, beside that plugin's config), for the worker that runs it.
"""

from __future__ import annotations

from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.plugin_tasks import PLUGIN_TASK_TYPES, PYTHON_FUNCTION_TYPES
from sluice.flyte.simple_tasks import (
    ECHO_TYPE,
    SIDECAR_TYPE,
    echo_task,
    sidecar_as_python_task,
)
from sluice.plugins.builtin.flyte_exec import resolver_of
from sluice.plugins.builtin.flyte_literals import type_spec
from sluice.spec.canonical import digest
from sluice.spec.compound import DYNAMIC_TYPE
from sluice.spec.models import CacheSpec, InputSpec, Interface, TaskMetadata, TaskSpec

DYNAMIC_MARK = "_F_SS_C"
"""The environment variable flytekit sets on @dynamic and eager tasks only (the serialization
context their code needs to compile a workflow while it runs)."""
DYNAMIC_BUILDER = "sluice.flyte.dynamic:built_workflow"
"""What turns a @dynamic task's DynamicJobSpec into the sluice workflow its node runs; the
worker imports it by this name (as the python plugin imports a task's function)."""
MAP_RESOLVER = "flytekit.core.array_node_map_task.ArrayNodeMapTaskResolver"
"""The resolver of a map_task's own template (flyte/array_nodes.py)."""
SUPPORTED_TYPES = ("python-task", *PLUGIN_TASK_TYPES)
"""Task types sluice translates to its own plugins. Any other type is kept as it is (the task
spec's type, with the template in `custom`): a plugin routed to it (a Flyte agent, see
plugins/builtin/flyte_agent.py) runs it, and with none the launch is refused, naming the task
and its type, before anything is written."""


def task_spec(template: Any, source_root: str = "", module_file: str = "") -> TaskSpec:
    """The sluice task of a flyteidl TaskTemplate; DefinitionError naming what is unsupported."""
    from google.protobuf import json_format

    name = template.id.name
    where = f"Flyte task {name!r}"
    if template.type == ECHO_TYPE:
        return echo_task(template, where)
    if template.type == SIDECAR_TYPE:
        template = sidecar_as_python_task(template, where)
    if template.HasField("container") and MAP_RESOLVER in template.container.args:
        raise DefinitionError(
            f"{where} is a flytekit map_task: sluice runs it as a map node of a workflow; "
            "call it inside a @workflow"
        )
    if template.type in PYTHON_FUNCTION_TYPES:
        try:
            resolver_of(list(template.container.args))
        except ValueError as exc:
            raise DefinitionError(f"{where}: {exc}") from None
    as_json = json_format.MessageToDict(template)
    custom: dict[str, Any] = {
        "template": as_json,
        "source_root": source_root,
        "module_file": module_file,
    }
    task_type = template.type
    if is_dynamic(template) and not template.metadata.is_eager:  # eager: flyte_context.py
        task_type = DYNAMIC_TYPE
        custom = {**custom, "build_type": template.type, "dynamic_builder": DYNAMIC_BUILDER}
    translate = PLUGIN_TASK_TYPES.get(template.type) if task_type == template.type else None
    if translate is not None:
        task_type, config = translate(as_json, where)
        custom = {**config, "flyte": custom} if template.type in PYTHON_FUNCTION_TYPES else config
    draft = TaskSpec(
        name=name,
        version="",
        type=task_type,
        interface=interface(template.interface, where),
        metadata=_metadata(template.metadata, where),
        custom=custom,
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})


def is_dynamic(template: Any) -> bool:
    """Whether a task template is a flytekit @dynamic (or eager) task."""
    return template.HasField("container") and any(
        pair.key == DYNAMIC_MARK for pair in template.container.env
    )


def interface(typed: Any, where: str, defaults: dict[str, Any] | None = None) -> Interface:
    """A flyteidl TypedInterface as a sluice Interface; `defaults` give inputs their default."""
    defaults = defaults or {}
    inputs = {
        name: InputSpec(
            type=type_spec(var.type, f"{where}: input {name!r}"),
            default=defaults.get(name),
            has_default=name in defaults,
        )
        for name, var in typed.inputs.variables.items()
    }
    outputs = {
        name: type_spec(var.type, f"{where}: output {name!r}")
        for name, var in typed.outputs.variables.items()
    }
    return Interface(inputs=inputs, outputs=outputs)


def _metadata(meta: Any, where: str) -> TaskMetadata:
    timeout = meta.timeout.ToTimedelta().total_seconds() if meta.HasField("timeout") else 0
    return TaskMetadata(
        retries=meta.retries.retries,
        timeout=timeout if timeout > 0 else None,
        interruptible=meta.interruptible,
        cache=_cache(meta, where),
    )


def _cache(meta: Any, where: str) -> CacheSpec:
    if not meta.discoverable:
        if meta.cache_serializable:
            raise DefinitionError(f"{where}: cache_serialize needs cache=True")
        return CacheSpec()
    return CacheSpec(
        enabled=True,
        version=meta.discovery_version,
        serialize=meta.cache_serializable,
        ignored_inputs=tuple(meta.cache_ignore_input_vars),
    )
