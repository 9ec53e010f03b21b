"""A flyteidl workflow template -> a sluice WorkflowSpec.

Nodes keep Flyte's ids (n0, n1, ...). Bindings map one to one: a promise on the start node is a
workflow input, any other promise an upstream output, a scalar a constant (converted with the
type of the input it feeds), collections and maps of bindings lists and dicts. Task nodes are
supported; branch, gate, array (map_task) and sub-workflow nodes are refused naming the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.entities import FlyteEntities
from sluice.flyte.tasks import interface, task_spec
from sluice.plugins.builtin.flyte_literals import to_json
from sluice.spec.canonical import digest
from sluice.spec.models import Binding, NodeSpec, TaskSpec, WorkflowSpec
from sluice.spec.validate import validate_workflow

START_NODES = ("", "start-node")  # flytekit writes "", the compiled form "start-node"
_UNSUPPORTED = {
    "branch_node": "a branch (conditional) node",
    "gate_node": "a gate (approve, sleep, wait_for_input) node",
    "array_node": "an array (map_task) node",
    "workflow_node": "a sub-workflow or launch plan node",
}


def workflow_spec(
    entities: FlyteEntities, name: str, defaults: Mapping[str, Any] | None = None
) -> WorkflowSpec:
    """The sluice workflow of the Flyte workflow `name`; `defaults` are its inputs' defaults
    (JSON), from its default launch plan."""
    template = entities.workflow(name).template
    where = f"Flyte workflow {name!r}"
    tasks = _tasks_of(entities, template, where)
    by_node = {n.id: tasks[n.task_node.reference_id.name] for n in template.nodes}
    nodes = tuple(
        _node(node, by_node[node.id], _inputs_of(entities, node), by_node, where)
        for node in template.nodes
    )
    outputs = {
        b.var: _binding(b.binding, None, by_node, f"{where}: output {b.var!r}")
        for b in template.outputs
    }
    draft = WorkflowSpec(
        name=name,
        version="",
        interface=interface(template.interface, where, dict(defaults or {})),
        nodes=nodes,
        outputs=outputs,
        tasks={t.key: t for t in tasks.values()},
    )
    spec = draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
    validate_workflow(spec)
    return spec


def _tasks_of(entities: FlyteEntities, template: Any, where: str) -> dict[str, TaskSpec]:
    found: dict[str, TaskSpec] = {}
    for node in template.nodes:
        target = node.WhichOneof("target")
        if target != "task_node":
            what = _UNSUPPORTED.get(target or "", f"a {target} node")
            raise DefinitionError(f"{where}: node {node.id!r} is {what}, not supported yet")
        task_name = node.task_node.reference_id.name
        task = entities.tasks.get(task_name)
        if task is None:
            raise DefinitionError(f"{where}: node {node.id!r} runs task {task_name!r}, not found")
        if task_name not in found:
            root, file = entities.root_of(task_name), entities.files.get(task_name, "")
            found[task_name] = task_spec(task.template, root, file)
    return found


def _inputs_of(entities: FlyteEntities, node: Any) -> Any:
    """The input variables (flyteidl Variable by name) of the task a task node runs."""
    return entities.tasks[node.task_node.reference_id.name].template.interface.inputs.variables


def _node(
    node: Any, task: TaskSpec, variables: Any, by_node: dict[str, TaskSpec], where: str
) -> NodeSpec:
    here = f"{where}: node {node.id!r}"
    inputs = {}
    for binding in node.inputs:
        if binding.var not in variables:
            raise DefinitionError(f"{here}: task {task.name!r} has no input {binding.var!r}")
        inputs[binding.var] = _binding(
            binding.binding, variables[binding.var].type, by_node, f"{here}: input {binding.var!r}"
        )
    upstream = {n for n in node.upstream_node_ids if n not in START_NODES}
    for bound in inputs.values():
        upstream |= bound.upstream_nodes()
    return NodeSpec(id=node.id, task=task.key, inputs=inputs, upstream=tuple(sorted(upstream)))


def _binding(data: Any, literal_type: Any, by_node: dict[str, TaskSpec], where: str) -> Binding:
    kind = data.WhichOneof("value")
    if kind == "promise":
        return _promise(data.promise, by_node, where)
    if kind == "collection":
        item = literal_type.collection_type if literal_type is not None else None
        items = tuple(
            _binding(b, item, by_node, f"{where}[{i}]")
            for i, b in enumerate(data.collection.bindings)
        )
        return Binding(kind="list", items=items)
    if kind == "map":
        value = literal_type.map_value_type if literal_type is not None else None
        pairs = data.map.bindings
        items = tuple(_binding(pairs[k], value, by_node, f"{where}[{k!r}]") for k in pairs)
        return Binding(kind="dict", keys=tuple(pairs), items=items)
    if kind == "scalar" and literal_type is not None:
        from flyteidl.core import literals_pb2

        literal = literals_pb2.Literal(scalar=data.scalar)
        return Binding(kind="constant", value=to_json(literal, literal_type, where))
    raise DefinitionError(f"{where}: a Flyte binding of kind {kind!r} is not supported yet")


def _promise(ref: Any, by_node: dict[str, TaskSpec], where: str) -> Binding:
    if len(ref.attr_path):
        raise DefinitionError(f"{where}: attribute access on a promise is not supported yet")
    if ref.node_id in START_NODES:
        return Binding(kind="input", name=ref.var)
    if ref.node_id not in by_node:
        raise DefinitionError(f"{where}: bound to unknown node {ref.node_id!r}")
    return Binding(kind="output", node=ref.node_id, output=ref.var)


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
