"""The nodes of a flyteidl workflow template -> sluice nodes (see flyte/workflows.py).

A Translator walks one workflow template (and, inlined, the sub-workflows it calls) in an
order where each node comes after the nodes it reads or waits for, adding sluice nodes and
tasks as it goes. A Scope is one template being walked: the prefix of its nodes' ids, what its
start-node promises stand for (the workflow's inputs at the top; the calling node's bindings
in a sub-workflow), and what every node of it waits for (the calling node's upstream).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice.engine.bindings import follow_path
from sluice.errors import DefinitionError, InputError
from sluice.flyte.array_nodes import map_task_spec
from sluice.flyte.entities import FlyteEntities
from sluice.flyte.tasks import task_spec
from sluice.plugins.builtin.flyte_literals import to_json
from sluice.spec.canonical import digest
from sluice.spec.compound import LAUNCH_PLAN_TYPE, LaunchPlanCall
from sluice.spec.models import Binding, Interface, NodeSpec, TaskSpec
from sluice.spec.types import JSON, TypeSpec

START_NODES = ("", "start-node")  # flytekit writes "", the compiled form "start-node"
SUB_WORKFLOW_SEPARATOR = "-"
MAX_DEPTH = 16
"""Sub-workflows nested deeper than this are refused (a cycle of references otherwise)."""


@dataclass
class Scope:
    prefix: str = ""
    inputs: dict[str, Binding] | None = None
    after: frozenset[str] = frozenset()
    depth: int = 0
    produced: dict[str, dict[str, Binding]] = field(default_factory=dict)
    """Inlined sub-workflow node -> its outputs' bindings (in the outer workflow's terms)."""
    ends: dict[str, set[str]] = field(default_factory=dict)
    """A node of this template -> the sluice nodes waiting for it means waiting for."""
    capture: Capture | None = None
    """In a branch's case: where values from outside the case become the case's inputs."""


@dataclass
class Capture:
    """The values a branch's cases read from outside (workflow inputs, upstream outputs): each
    an input `ext{i}` of the case workflows, bound in the outer workflow to what it was."""

    outer: Scope
    bound: dict[str, Binding] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)


class Translator:
    def __init__(self, entities: FlyteEntities, sub_workflows: dict[str, Any]) -> None:
        self.entities = entities
        self.sub_workflows = sub_workflows
        self.nodes: list[NodeSpec] = []
        self.tasks: dict[str, TaskSpec] = {}
        self.input_types: dict[str, TypeSpec] = {}
        """The workflow's input types (`type_of` an input binding), when known."""

    def template(self, template: Any, scope: Scope, where: str) -> dict[str, Binding]:
        """Add the template's nodes; return its outputs' bindings."""
        for node in ordered(template.nodes, where):
            self.node(node, scope, where)
        return {
            b.var: self.binding(b.binding, None, scope, f"{where}: output {b.var!r}")
            for b in template.outputs
        }

    def node(self, node: Any, scope: Scope, where: str) -> None:
        here = f"{where}: node {node.id!r}"
        target = node.WhichOneof("target")
        if target == "task_node":
            template = self._task_template(node.task_node.reference_id.name, here)
            self._add(node, self._task(template, here), template.interface, scope, here)
        elif target == "array_node":
            self._array(node, scope, where, here)
        elif target == "workflow_node":
            self._workflow_node(node, scope, where, here)
        elif target == "branch_node":
            from sluice.flyte.branch_nodes import branch_task

            task, inputs = branch_task(self, node, scope, here)
            self._add_spec(node, task, inputs, scope)
        elif target == "gate_node":
            self._gate(node, scope, here)
        else:
            raise DefinitionError(f"{here} is a {target} node, not supported yet")

    def _gate(self, node: Any, scope: Scope, here: str) -> None:
        from sluice.flyte.gate_nodes import gate_task

        inputs = {
            b.var: self.binding(b.binding, None, scope, f"{here}: input {b.var!r}")
            for b in node.inputs
        }
        passed = next(iter(inputs.values()), None)
        task = gate_task(node, self.type_of(passed) if passed else JSON, here)
        self._add_spec(node, task, inputs, scope)

    def type_of(self, binding: Binding) -> TypeSpec:
        """The type of a bound value, where the translation knows it; JSON otherwise."""
        if binding.kind == "output":
            spec = next((n for n in self.nodes if n.id == binding.node), None)
            found = self.tasks[spec.task].interface.outputs.get(binding.output) if spec else None
        elif binding.kind == "input":
            found = self.input_types.get(binding.name)
        else:
            found = None
        for _ in binding.path if found is not None else ():
            if found is None or found.kind not in ("list", "dict"):
                return JSON
            found = found.args[0]
        return found or JSON

    def _array(self, node: Any, scope: Scope, where: str, here: str) -> None:
        inner = node.array_node.node
        if inner.WhichOneof("target") != "task_node":
            raise DefinitionError(f"{here} is an array node over a non-task node, not supported")
        name = inner.task_node.reference_id.name
        template = self._task_template(name, here)
        root, file = self.entities.root_of(name), self.entities.files.get(name, "")
        task = map_task_spec(node, template, root, file, where)
        self._add(node, task, template.interface, scope, here)

    def _workflow_node(self, node: Any, scope: Scope, where: str, here: str) -> None:
        reference = node.workflow_node.WhichOneof("reference")
        if reference == "launchplan_ref":
            task, variables = self._launch_plan_task(node.workflow_node.launchplan_ref.name, here)
            self._add(node, task, variables, scope, here)
            return
        name = node.workflow_node.sub_workflow_ref.name
        sub = self.sub_workflows.get(name)
        if sub is None and name in self.entities.workflows:
            sub = self.entities.workflows[name].template
        if sub is None:
            raise DefinitionError(f"{here} calls sub-workflow {name!r}, not found")
        if scope.depth >= MAX_DEPTH:
            raise DefinitionError(f"{here}: sub-workflows nested over {MAX_DEPTH} deep")
        from sluice.flyte.workflows import refuse_failure_node

        refuse_failure_node(sub, f"{here} (sub-workflow {name!r})")
        self._inline(node, sub, scope, here)

    def _inline(self, node: Any, sub: Any, scope: Scope, here: str) -> None:
        variables = sub.interface.inputs.variables
        inputs = self._inputs(node, variables, scope, f"{here} (sub-workflow {sub.id.name!r})")
        missing = sorted(set(variables) - set(inputs))
        if missing:
            raise DefinitionError(f"{here}: sub-workflow input {missing[0]!r} is not bound")
        first = len(self.nodes)
        inner = Scope(
            prefix=f"{scope.prefix}{node.id}{SUB_WORKFLOW_SEPARATOR}",
            inputs=inputs,
            after=frozenset(self._upstream(node, inputs, scope)),
            depth=scope.depth + 1,
        )
        where = f"{here} (sub-workflow {sub.id.name!r})"
        scope.produced[node.id] = self.template(sub, inner, where)
        scope.ends[node.id] = {n.id for n in self.nodes[first:]}

    def _add(self, node: Any, task: TaskSpec, typed: Any, scope: Scope, here: str) -> None:
        self._add_spec(node, task, self._inputs(node, typed.inputs.variables, scope, here), scope)

    def _add_spec(
        self, node: Any, task: TaskSpec, inputs: dict[str, Binding], scope: Scope
    ) -> None:
        spec = NodeSpec(
            id=scope.prefix + node.id,
            task=task.key,
            inputs=inputs,
            upstream=tuple(sorted(self._upstream(node, inputs, scope))),
        )
        self.tasks.setdefault(task.key, task)
        self.nodes.append(spec)
        scope.ends[node.id] = {spec.id}

    def _inputs(self, node: Any, variables: Any, scope: Scope, here: str) -> dict[str, Binding]:
        inputs = {}
        for bound in node.inputs:
            if bound.var not in variables:
                raise DefinitionError(f"{here}: has no input {bound.var!r}")
            inputs[bound.var] = self.binding(
                bound.binding, variables[bound.var].type, scope, f"{here}: input {bound.var!r}"
            )
        return inputs

    def _upstream(self, node: Any, inputs: dict[str, Binding], scope: Scope) -> set[str]:
        found = set(scope.after)
        for local in node.upstream_node_ids:
            found |= scope.ends.get(local, set())
        for bound in inputs.values():
            found |= bound.upstream_nodes()
        return found

    def _task_template(self, name: str, here: str) -> Any:
        task = self.entities.tasks.get(name)
        if task is None:
            raise DefinitionError(f"{here} runs task {name!r}, not found")
        return task.template

    def _task(self, template: Any, here: str) -> TaskSpec:
        name = template.id.name
        root, file = self.entities.root_of(name), self.entities.files.get(name, "")
        try:
            return task_spec(template, root, file)
        except DefinitionError as exc:
            raise DefinitionError(f"{here}: {exc}") from None

    def _launch_plan_task(self, name: str, here: str) -> tuple[TaskSpec, Any]:
        from sluice.flyte.launch_plans import launch_plan_spec

        plan = self.entities.launch_plans.get(name)
        if plan is None:
            raise DefinitionError(f"{here} calls launch plan {name!r}, not found")
        workflow, spec = launch_plan_spec(self.entities, plan)
        typed = self.entities.workflow(plan.spec.workflow_id.name).template.interface
        inputs = {
            n: declared.model_copy(update={"default": spec.default_inputs[n], "has_default": True})
            if n in spec.default_inputs
            else declared
            for n, declared in workflow.interface.inputs.items()
            if n not in spec.fixed_inputs
        }
        draft = TaskSpec(
            name=f"launch_plan.{name}",
            version="",
            type=LAUNCH_PLAN_TYPE,
            interface=Interface(inputs=inputs, outputs=dict(workflow.interface.outputs)),
            custom=LaunchPlanCall(launch_plan=spec, workflow=workflow).model_dump(mode="json"),
        )
        task = draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
        return task, typed

    def binding(self, data: Any, literal_type: Any, scope: Scope, where: str) -> Binding:
        kind = data.WhichOneof("value")
        if kind == "promise":
            return self._promise(data.promise, scope, where)
        if kind == "collection":
            item = literal_type.collection_type if literal_type is not None else None
            items = tuple(
                self.binding(b, item, scope, f"{where}[{i}]")
                for i, b in enumerate(data.collection.bindings)
            )
            return Binding(kind="list", items=items)
        if kind == "map":
            value = literal_type.map_value_type if literal_type is not None else None
            pairs = data.map.bindings
            items = tuple(self.binding(pairs[k], value, scope, f"{where}[{k!r}]") for k in pairs)
            return Binding(kind="dict", keys=tuple(pairs), items=items)
        if kind == "scalar" and literal_type is not None:
            from flyteidl.core import literals_pb2

            literal = literals_pb2.Literal(scalar=data.scalar)
            return Binding(kind="constant", value=to_json(literal, literal_type, where))
        raise DefinitionError(f"{where}: a Flyte binding of kind {kind!r} is not supported yet")

    def _promise(self, ref: Any, scope: Scope, where: str) -> Binding:
        path = tuple(getattr(a, a.WhichOneof("value") or "string_value") for a in ref.attr_path)
        return with_path(self._promised_value(ref, scope, where), path, where)

    def _promised_value(self, ref: Any, scope: Scope, where: str) -> Binding:
        capture = scope.capture
        if capture is not None and ref.node_id not in {*scope.ends, *scope.produced}:
            key = f"{ref.node_id}.{ref.var}"
            if key not in capture.names:
                capture.names[key] = name = f"ext{len(capture.names)}"
                capture.bound[name] = self._promise(ref, capture.outer, where)
            return Binding(kind="input", name=capture.names[key])
        if ref.node_id in START_NODES:
            if scope.inputs is None:
                return Binding(kind="input", name=ref.var)
            if ref.var not in scope.inputs:
                raise DefinitionError(f"{where}: sub-workflow input {ref.var!r} is not bound")
            return scope.inputs[ref.var]
        if ref.node_id in scope.produced:
            outputs = scope.produced[ref.node_id]
            if ref.var not in outputs:
                raise DefinitionError(f"{where}: sub-workflow has no output {ref.var!r}")
            return outputs[ref.var]
        if ref.node_id not in scope.ends:
            raise DefinitionError(f"{where}: bound to unknown node {ref.node_id!r}")
        return Binding(kind="output", node=scope.prefix + ref.node_id, output=ref.var)


def with_path(binding: Binding, path: tuple[str | int, ...], where: str) -> Binding:
    """`binding` followed by an attribute path (Flyte's `out.field`, `out[0]`, `out["k"]`):
    a path on an input or output binding, resolved when the node starts; taken at once from a
    constant, a list or a dict (a sub-workflow input bound to one)."""
    if not path:
        return binding
    if binding.kind in ("input", "output"):
        return binding.model_copy(update={"path": (*binding.path, *path)})
    if binding.kind == "constant":
        try:
            return Binding(kind="constant", value=follow_path(binding.value, path, where))
        except InputError as exc:
            raise DefinitionError(str(exc)) from None
    step, rest = path[0], path[1:]
    keys: list[str | int] = list(binding.keys) if binding.kind == "dict" else []
    index = keys.index(step) if step in keys else step if binding.kind == "list" else None
    if not isinstance(index, int) or not 0 <= index < len(binding.items):
        raise DefinitionError(f"{where}: a {binding.kind} binding has no {step!r}")
    return with_path(binding.items[index], rest, where)


def ordered(nodes: Any, where: str) -> list[Any]:
    """The nodes, each after those it reads (promises) or waits for (upstream_node_ids)."""
    by_id = {n.id: n for n in nodes}
    done: set[str] = set()
    found: list[Any] = []

    def needs(node: Any) -> set[str]:
        wanted = set(node.upstream_node_ids)
        for bound in node.inputs:
            wanted |= _promised(bound.binding)
        return {n for n in wanted if n in by_id}

    pending = list(nodes)
    while pending:
        ready = [n for n in pending if needs(n) <= done]
        if not ready:
            raise DefinitionError(f"{where}: nodes {[n.id for n in pending]} form a cycle")
        for node in ready:
            found.append(node)
            done.add(node.id)
        pending = [n for n in pending if n.id not in done]
    return found


def _promised(data: Any) -> set[str]:
    kind = data.WhichOneof("value")
    if kind == "promise":
        return {data.promise.node_id}
    if kind == "collection":
        return set().union(*(_promised(b) for b in data.collection.bindings))
    if kind == "map":
        return set().union(*(_promised(b) for b in data.map.bindings.values()))
    return set()
