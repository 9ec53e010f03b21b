"""A Flyte branch node (flytekit `conditional`) -> a sluice dynamic node that picks its case.

sluice has no branch node of its own: a branch becomes a dynamic node (spec/compound.py)
whose build child runs `CHOOSE` on the python plugin. Its inputs are the branch's operands
(`op0`, `op1`... bound to what the branch node's inputs were), the values its cases read from
outside (`ext0`, `ext1`...: workflow inputs and upstream outputs), and `cases`, a constant:
each case's condition (flyteidl's BooleanExpression as JSON, operand names rewritten) and its
then-node translated to a small workflow whose outside values are inputs; the else case has
no condition, or is an error (`else_().fail(...)`). CHOOSE evaluates the conditions in order,
fills the chosen workflow's inputs with the values as constants and returns it; the engine
runs its nodes as the node's children, and the branch's outputs are the chosen node's.
Nothing of the branches not taken runs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from sluice.engine.bindings import follow_path
from sluice.errors import DefinitionError
from sluice.spec.compound import BUILD_OUTPUT
from sluice.spec.models import Binding, WorkflowSpec
from sluice.spec.validate import validate_workflow

CHOOSE_REF = ("sluice.flyte.branches", "CHOOSE")
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "EQ": operator.eq,
    "NEQ": operator.ne,
    "GT": operator.gt,
    "GTE": operator.ge,
    "LT": operator.lt,
    "LTE": operator.le,
}
_PRIMITIVES: dict[str, Callable[[Any], Any]] = {
    "integer": int,
    "floatValue": float,
    "stringValue": str,
    "boolean": bool,
}


def condition_json(expression: Any, operands: dict[str, str], where: str) -> dict[str, Any]:
    """A BooleanExpression as JSON, its operand variables renamed to the build's inputs."""
    from google.protobuf import json_format

    found: dict[str, Any] = json_format.MessageToDict(expression)
    _rename(found, operands, where)
    return found


def _rename(expression: dict[str, Any], operands: dict[str, str], where: str) -> None:
    if "conjunction" in expression:
        _rename(expression["conjunction"]["leftExpression"], operands, where)
        _rename(expression["conjunction"]["rightExpression"], operands, where)
        return
    for side in ("leftValue", "rightValue"):
        operand = expression["comparison"][side]
        if "var" in operand:
            if operand["var"] not in operands:
                raise DefinitionError(f"{where}: condition reads unbound {operand['var']!r}")
            operand["var"] = operands[operand["var"]]
        elif set(_primitive_of(operand) or {"none": None}) - set(_PRIMITIVES):
            raise DefinitionError(
                f"{where}: condition operand {operand} is not supported yet (only int, float, "
                "str and bool constants)"
            )


def _primitive_of(operand: dict[str, Any]) -> dict[str, Any] | None:
    found = operand.get("primitive") or operand.get("scalar", {}).get("primitive")
    return found if isinstance(found, dict) else None


def evaluate(expression: dict[str, Any], values: dict[str, Any]) -> bool:
    """Whether a condition (condition_json) holds for the operands' values."""
    if "conjunction" in expression:
        conjunction = expression["conjunction"]
        left = evaluate(conjunction["leftExpression"], values)
        if conjunction.get("operator", "AND") == "OR":
            return left or evaluate(conjunction["rightExpression"], values)
        return left and evaluate(conjunction["rightExpression"], values)
    comparison = expression["comparison"]
    compare = _COMPARE[comparison.get("operator", "EQ")]
    return compare(
        _value(comparison["leftValue"], values), _value(comparison["rightValue"], values)
    )


def _value(operand: dict[str, Any], values: dict[str, Any]) -> Any:
    if "var" in operand:
        return values[operand["var"]]
    primitive = _primitive_of(operand) or {}
    kind, raw = next(iter(primitive.items()))
    return _PRIMITIVES[kind](raw) if kind in _PRIMITIVES else raw


def with_constants(workflow: WorkflowSpec, values: dict[str, Any]) -> WorkflowSpec:
    """The case's workflow with its inputs (the outside values) bound as constants."""

    def fill(binding: Binding) -> Binding:
        if binding.kind == "input":
            where = f"branch input {binding.name!r}"
            value = follow_path(values[binding.name], binding.path, where)
            return Binding(kind="constant", value=value)
        if binding.kind in ("list", "dict"):
            return binding.model_copy(update={"items": tuple(fill(i) for i in binding.items)})
        return binding

    nodes = tuple(
        n.model_copy(update={"inputs": {k: fill(b) for k, b in n.inputs.items()}})
        for n in workflow.nodes
    )
    outputs = {k: fill(b) for k, b in workflow.outputs.items()}
    filled = workflow.model_copy(
        update={
            "nodes": nodes,
            "outputs": outputs,
            "interface": workflow.interface.model_copy(update={"inputs": {}}),
        }
    )
    validate_workflow(filled)
    return filled


class _Choose:
    """What the python plugin runs for a branch's build child (it calls `execute_json`)."""

    def execute_json(self, inputs: dict[str, Any]) -> dict[str, Any]:
        for case in inputs["cases"]:
            condition = case.get("condition")
            if condition is not None and not evaluate(condition, inputs):
                continue
            if "error" in case:
                raise RuntimeError(f"branch {case['branch']!r}: {case['error']}")
            chosen = WorkflowSpec.model_validate(case["workflow"])
            return {BUILD_OUTPUT: with_constants(chosen, inputs).model_dump(mode="json")}
        raise RuntimeError(
            f"branch {inputs['cases'][0]['branch']!r}: no case matched and there is no else"
        )


CHOOSE = _Choose()
