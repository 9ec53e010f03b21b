"""A flytekit @dynamic task's DynamicJobSpec -> the sluice workflow its dynamic node runs.

A @dynamic task is translated to a sluice dynamic task (spec/compound.py) whose build node
runs the flytekit function on the flyte plugin, with the serialization context flytekit
compiles with (its template's `_F_SS_C` variable). flytekit then writes a DynamicJobSpec
(`futures.pb`: nodes, the task templates they run, sub-workflows, output bindings) instead of
outputs; the worker calls `built_workflow` on it (by name: tasks.DYNAMIC_BUILDER), which
translates it as any Flyte workflow (flyte/nodes.py) into the workflow the engine then runs
as the node's children. A function that calls no task makes flytekit write its outputs
directly: the workflow is then one of constant outputs and no nodes.
"""

from __future__ import annotations

from typing import Any

from sluice.flyte.entities import FlyteEntities
from sluice.flyte.nodes import Scope, Translator
from sluice.flyte.tasks import interface
from sluice.plugins.builtin.flyte_literals import to_json
from sluice.spec.canonical import digest
from sluice.spec.models import Binding, WorkflowSpec


def built_workflow(
    template: Any, spec: Any | None, values: Any | None, source_root: str
) -> dict[str, Any]:
    """The sluice workflow (JSON) of what the @dynamic task `template` wrote: its
    DynamicJobSpec `spec`, or its output LiteralMap `values`."""
    from flyteidl.admin import task_pb2

    name = template.id.name
    where = f"Flyte @dynamic task {name!r}"
    typed = template.interface
    declared = Scope()
    translator = Translator(FlyteEntities(source_root=source_root), {})
    if spec is not None:
        for task in spec.tasks:
            translator.entities.tasks[task.id.name] = task_pb2.TaskSpec(template=task)
        translator.sub_workflows = {w.id.name: w for w in spec.subworkflows}
        outputs = translator.template(spec, declared, where)
    elif values is not None:
        outputs = {
            k: Binding(
                kind="constant",
                value=to_json(v, typed.outputs.variables[k].type, f"{where}: output {k!r}"),
            )
            for k, v in values.literals.items()
        }
    else:
        outputs = {}
    full = interface(typed, where)
    draft = WorkflowSpec(
        name=f"{name}.dynamic",
        version="",
        interface=full.model_copy(update={"inputs": {}}),
        nodes=tuple(translator.nodes),
        outputs=outputs,
        tasks=dict(translator.tasks),
    )
    built = draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
    return built.model_dump(mode="json")
