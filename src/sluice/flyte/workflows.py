"""A flyteidl workflow template -> a sluice WorkflowSpec.

Nodes keep Flyte's ids (n0, n1, ...). Bindings map one to one: a promise on the start node is a
workflow input, any other promise an upstream output, a scalar a constant (converted with the
type of the input it feeds), collections and maps of bindings lists and dicts.

Node kinds (flyte/nodes.py): a task node runs its task; an array node (`map_task`) becomes a
sluice map node; a launch plan node (`launchplan_ref`) a sluice launch plan node, which starts
a child execution under the launch plan's concurrency policy; a sub-workflow node
(`sub_workflow_ref`, a @workflow called in a @workflow) is inlined: its nodes join the
workflow as `{node}-{its node}`, its inputs bound to what the node's were, and what read the
node's outputs reads its outputs' bindings. A task node of a @dynamic task becomes a sluice
dynamic node (flyte/dynamic.py), and so does a branch node (flyte/branch_nodes.py: its build
picks the case). A gate node becomes a sluice gate (flyte/gate_nodes.py), which waits in
the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.entities import FlyteEntities
from sluice.flyte.nodes import Scope, Translator
from sluice.flyte.tasks import interface
from sluice.plugins.builtin.flyte_literals import is_error_type
from sluice.spec.canonical import digest
from sluice.spec.models import Binding, NodeSpec, OnFailure, TaskSpec, WorkflowSpec
from sluice.spec.validate import validate_workflow


def workflow_spec(
    entities: FlyteEntities, name: str, defaults: Mapping[str, Any] | None = None
) -> WorkflowSpec:
    """The sluice workflow of the Flyte workflow `name`; `defaults` are its inputs' defaults
    (JSON), from its default launch plan."""
    spec = entities.workflow(name)
    template = spec.template
    where = f"Flyte workflow {name!r}"
    translator = Translator(entities, {w.id.name: w for w in spec.sub_workflows})
    typed = interface(template.interface, where, dict(defaults or {}))
    translator.input_types = {n: i.type for n, i in typed.inputs.items()}
    outputs = translator.template(template, Scope(), where)
    handler = _failure_handler(translator, template, where)
    draft = WorkflowSpec(
        name=name,
        version="",
        interface=typed,
        nodes=tuple(translator.nodes),
        outputs=outputs,
        tasks=dict(translator.tasks),
        on_failure=handler,
    )
    spec_out = draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
    validate_workflow(spec_out)
    return spec_out


def _failure_handler(translator: Translator, template: Any, where: str) -> OnFailure | None:
    """The workflow's `on_failure` task as its failure handler node (engine/on_failure.py):
    a node waiting for every other, its FlyteError input (if it declares one) bound by the
    engine to the failure."""
    if not (template.HasField("failure_node") and template.failure_node.id):
        return None
    node = template.failure_node
    if node.WhichOneof("target") != "task_node":
        raise DefinitionError(f"{where}: on_failure node {node.id!r} must run a task")
    others = tuple(n.id for n in translator.nodes)
    translator.node(node, Scope(), f"{where} (on_failure)")
    added = translator.nodes.pop()
    translator.nodes.append(added.model_copy(update={"upstream": others}))
    variables = translator.entities.tasks[node.task_node.reference_id.name].template.interface
    error_input = next(
        (n for n, v in variables.inputs.variables.items() if is_error_type(v.type)), ""
    )
    return OnFailure(node=added.id, error_input=error_input)


def refuse_failure_node(template: Any, where: str) -> None:
    """A sub-workflow's `on_failure` handler is refused by name rather than silently dropped
    (sluice inlines sub-workflows: there is no sub-workflow failure to handle apart)."""
    if template.HasField("failure_node") and template.failure_node.id:
        node = template.failure_node
        raise DefinitionError(
            f"{where}: node {node.id!r} ({node.metadata.name or 'on_failure'}) is the "
            "sub-workflow's on_failure handler, which sluice does not run (a workflow's own "
            "on_failure runs)"
        )


def task_workflow(task: TaskSpec) -> WorkflowSpec:
    """A one-node workflow running `task` (what `sluice run module.py:a_flytekit_task` runs)."""
    node = NodeSpec(
        id="n0",
        task=task.key,
        inputs={name: Binding(kind="input", name=name) for name in task.interface.inputs},
    )
    outputs = {
        name: Binding(kind="output", node="n0", output=name) for name in task.interface.outputs
    }
    draft = WorkflowSpec(
        name=task.name,
        version="",
        interface=task.interface,
        nodes=(node,),
        outputs=outputs,
        tasks={task.key: task},
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
