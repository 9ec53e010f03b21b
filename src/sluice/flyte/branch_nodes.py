"""Translation of a Flyte branch node (flytekit `conditional`) to the dynamic node that picks
its case at run time (the run-time side, CHOOSE, is in flyte/branches.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.errors import DefinitionError
from sluice.flyte.branches import CHOOSE_REF, condition_json
from sluice.flyte.tasks import interface
from sluice.spec.canonical import digest
from sluice.spec.compound import DYNAMIC_TYPE
from sluice.spec.models import Binding, InputSpec, Interface, SourceRef, TaskSpec, WorkflowSpec
from sluice.spec.types import JSON, TypeSpec

if TYPE_CHECKING:
    from sluice.flyte.nodes import Scope, Translator


def branch_task(
    translator: Translator, node: Any, scope: Scope, here: str
) -> tuple[TaskSpec, dict[str, Binding]]:
    """The dynamic task of a branch node and its node's input bindings."""
    from sluice.flyte.nodes import Capture

    if_else = node.branch_node.if_else
    operands = {b.var: f"op{i}" for i, b in enumerate(node.inputs)}
    inputs = {
        operands[b.var]: translator.binding(b.binding, None, scope, f"{here}: operand {b.var!r}")
        for b in node.inputs
    }
    capture = Capture(outer=scope)
    cases: list[dict[str, Any]] = []
    types: dict[str, TypeSpec] | None = None
    for i, case in enumerate([if_else.case, *if_else.other]):
        where = f"{here} case {i}"
        workflow = _case(translator, case.then_node, capture, where)
        types = types or dict(workflow.interface.outputs)
        condition = condition_json(case.condition, operands, where)
        cases.append({"branch": node.id, "condition": condition, "workflow": workflow})
    default = if_else.WhichOneof("default")
    if default == "else_node":
        workflow = _case(translator, if_else.else_node, capture, f"{here} else")
        cases.append({"branch": node.id, "workflow": workflow})
    elif default == "error":
        cases.append({"branch": node.id, "error": if_else.error.message})
    inputs.update(capture.bound)
    for case in cases:  # every case's workflow takes every outside value
        if "workflow" in case:
            case["workflow"] = _taking(case["workflow"], capture.bound).model_dump(mode="json")
    inputs["cases"] = Binding(kind="constant", value=cases)
    task = _task(node, {n: InputSpec(type=JSON) for n in inputs}, types or {}, here)
    return task, inputs


def _case(translator: Translator, then_node: Any, capture: Any, where: str) -> WorkflowSpec:
    """A case's then-node as a workflow of its own; what it reads from outside, its inputs."""
    from sluice.flyte.nodes import Scope, Translator

    sub = Translator(translator.entities, translator.sub_workflows)
    scope = Scope(capture=capture)
    sub.node(then_node, scope, where)
    if then_node.id in scope.produced:
        outputs = scope.produced[then_node.id]
        name = then_node.workflow_node.sub_workflow_ref.name
        template = sub.sub_workflows.get(name) or translator.entities.workflow(name).template
        types = interface(template.interface, where).outputs
    else:
        spec = next(n for n in sub.nodes if n.id == then_node.id)
        types = sub.tasks[spec.task].interface.outputs
        outputs = {v: Binding(kind="output", node=spec.id, output=v) for v in types}
    return WorkflowSpec(
        name=f"branch.{then_node.id}",
        version="",
        interface=Interface(outputs=dict(types)),
        nodes=tuple(sub.nodes),
        outputs=outputs,
        tasks=dict(sub.tasks),
    )


def _taking(workflow: WorkflowSpec, bound: dict[str, Binding]) -> WorkflowSpec:
    inputs = {name: InputSpec(type=JSON) for name in bound}
    return workflow.model_copy(
        update={"interface": workflow.interface.model_copy(update={"inputs": inputs})}
    )


def _task(
    node: Any, inputs: dict[str, InputSpec], outputs: dict[str, TypeSpec], here: str
) -> TaskSpec:
    if not outputs and not node.branch_node.if_else.other and not node.branch_node.if_else.case:
        raise DefinitionError(f"{here}: a branch node with no case")
    module, qualname = CHOOSE_REF
    draft = TaskSpec(
        name=f"branch.{node.metadata.name or node.id}",
        version="",
        type=DYNAMIC_TYPE,
        interface=Interface(inputs=inputs, outputs=outputs),
        source=SourceRef(module=module, qualname=qualname),
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
