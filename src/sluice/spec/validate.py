"""Validation of a WorkflowSpec: references, types and cycles, each error naming the node and
input. The SDK builds valid specs by construction; this also guards specs read as JSON."""

from __future__ import annotations

from collections.abc import Mapping

from sluice.errors import DefinitionError, InputError
from sluice.spec.models import Binding, NodeSpec, WorkflowSpec
from sluice.spec.types import TypeSpec, is_assignable, validate_json


def validate_workflow(spec: WorkflowSpec) -> list[str]:
    """Raise DefinitionError on the first problem; return node ids in a topological order."""
    where = f"workflow {spec.name!r}"
    nodes: dict[str, NodeSpec] = {}
    for node in spec.nodes:
        if node.id in nodes:
            raise DefinitionError(f"{where}: node id {node.id!r} is used twice")
        nodes[node.id] = node
    for node in spec.nodes:
        _check_node(spec, nodes, node, f"{where}: node {node.id!r}")
    if spec.on_failure is not None and spec.on_failure.node not in nodes:
        raise DefinitionError(f"{where}: on_failure names unknown node {spec.on_failure.node!r}")
    for name, binding in spec.outputs.items():
        target = spec.interface.outputs.get(name)
        if target is None:
            raise DefinitionError(f"{where}: output {name!r} is not declared")
        _check_binding(spec, nodes, binding, target, f"{where} output {name!r}")
    return topological_order(spec, nodes)


def _check_node(
    spec: WorkflowSpec, nodes: Mapping[str, NodeSpec], node: NodeSpec, where: str
) -> None:
    task = spec.tasks.get(node.task)
    if task is None:
        raise DefinitionError(f"{where}: unknown task {node.task!r}")
    for name, binding in node.inputs.items():
        declared = task.interface.inputs.get(name)
        if declared is None:
            raise DefinitionError(
                f"{where} has no input {name!r}; inputs are {sorted(task.interface.inputs)}"
            )
        _check_binding(spec, nodes, binding, declared.type, f"{where} input {name!r}")
    for name, declared in task.interface.inputs.items():
        if name not in node.inputs and not declared.has_default:
            raise DefinitionError(f"{where} input {name!r} is not bound and has no default")
    for upstream in node.upstream:
        if upstream not in nodes:
            raise DefinitionError(f"{where}: waits for unknown node {upstream!r}")


def _check_binding(
    spec: WorkflowSpec,
    nodes: Mapping[str, NodeSpec],
    binding: Binding,
    target: TypeSpec,
    where: str,
) -> None:
    source = _binding_type(spec, nodes, binding, target, where)
    if source is not None and not is_assignable(source, target):
        raise DefinitionError(f"{where}: expected {target}, got {source}")


def _binding_type(
    spec: WorkflowSpec,
    nodes: Mapping[str, NodeSpec],
    binding: Binding,
    target: TypeSpec,
    where: str,
) -> TypeSpec | None:
    if binding.kind == "input":
        declared = spec.interface.inputs.get(binding.name)
        if declared is None:
            raise DefinitionError(f"{where}: unknown workflow input {binding.name!r}")
        return _along(declared.type, binding.path, where)
    if binding.kind == "output":
        return _along(_output_type(spec, nodes, binding, where), binding.path, where)
    if binding.kind == "constant":
        try:
            validate_json(target, binding.value, where)
        except InputError as exc:
            raise DefinitionError(str(exc)) from None
        return None
    item = target.args[0] if target.kind in ("list", "dict") else TypeSpec(kind="json")
    if target.kind not in (binding.kind, "json"):
        raise DefinitionError(f"{where}: expected {target}, got a {binding.kind}")
    for i, child in enumerate(binding.items):
        _check_binding(spec, nodes, child, item, f"{where}[{i}]")
    return None


def _along(source: TypeSpec, path: tuple[str | int, ...], where: str) -> TypeSpec | None:
    """The type at a binding's attribute path; None (checked when the value is bound) where
    the path enters a value of no declared shape (JSON)."""
    for step in path:
        if source.kind == "json":
            return None
        if source.kind == "record" and isinstance(step, str):
            found = next((f.type for f in source.fields if f.name == step), None)
        elif source.kind in ("list", "dict") and isinstance(step, int) == (source.kind == "list"):
            found = source.args[0]
        else:
            found = None
        if found is None:
            raise DefinitionError(f"{where}: a {source} has no {step!r}")
        source = found
    return source


def _output_type(
    spec: WorkflowSpec, nodes: Mapping[str, NodeSpec], binding: Binding, where: str
) -> TypeSpec:
    upstream = nodes.get(binding.node)
    if upstream is None:
        raise DefinitionError(f"{where}: unknown node {binding.node!r}")
    outputs = spec.tasks[upstream.task].interface.outputs
    if binding.output not in outputs:
        raise DefinitionError(
            f"{where}: node {binding.node!r} has no output {binding.output!r}; "
            f"outputs are {sorted(outputs)}"
        )
    return outputs[binding.output]


def dependencies(node: NodeSpec) -> set[str]:
    found = set(node.upstream)
    for binding in node.inputs.values():
        found |= binding.upstream_nodes()
    return found


def topological_order(spec: WorkflowSpec, nodes: Mapping[str, NodeSpec] | None = None) -> list[str]:
    """Node ids so that every node comes after what it waits for; a cycle is an error."""
    nodes = nodes or {n.id: n for n in spec.nodes}
    waiting = {node_id: dependencies(node) for node_id, node in nodes.items()}
    order: list[str] = []
    ready = [node_id for node_id, deps in waiting.items() if not deps]
    dependents: dict[str, list[str]] = {}
    for node_id, deps in waiting.items():
        for dep in deps:
            dependents.setdefault(dep, []).append(node_id)
    while ready:
        node_id = ready.pop()
        order.append(node_id)
        for child in dependents.get(node_id, ()):
            waiting[child].discard(node_id)
            if not waiting[child]:
                ready.append(child)
    if len(order) != len(nodes):
        stuck = sorted(set(nodes) - set(order))
        raise DefinitionError(f"workflow {spec.name!r}: cycle through nodes {stuck}")
    return order
