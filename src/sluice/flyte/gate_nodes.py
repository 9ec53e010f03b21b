"""A Flyte gate node (flytekit `sleep`, `wait_for_input`, `approve`) -> a sluice gate task
(spec/gates.py), which the engine steps without a plugin: it waits in the store."""

from __future__ import annotations

from typing import Any

from sluice.errors import DefinitionError
from sluice.plugins.builtin.flyte_literals import type_spec
from sluice.spec.canonical import digest
from sluice.spec.gates import APPROVAL_OUTPUT, GATE_TYPE, GateOptions
from sluice.spec.models import InputSpec, Interface, TaskSpec
from sluice.spec.types import TypeSpec


def gate_task(node: Any, approved: TypeSpec, here: str) -> TaskSpec:
    """The gate task of a gate node; `approved` is the type of what an approve gate lets
    through (the type of the value bound to it)."""
    gate = node.gate_node
    kind = gate.WhichOneof("condition")
    timeout = _seconds(node.metadata.timeout) if node.metadata.HasField("timeout") else None
    if kind == "sleep":
        options = GateOptions(kind="sleep", duration=_seconds(gate.sleep.duration))
        typed = Interface()
    elif kind == "signal":
        signal = gate.signal
        value = type_spec(signal.type, f"{here}: input {signal.signal_id!r}")
        output = signal.output_variable_name or APPROVAL_OUTPUT
        options = GateOptions(
            kind="signal", signal_id=signal.signal_id, output=output, type=value, timeout=timeout
        )
        typed = Interface(outputs={output: value})
    elif kind == "approve":
        options = GateOptions(kind="approve", signal_id=gate.approve.signal_id, timeout=timeout)
        typed = Interface(
            inputs={APPROVAL_OUTPUT: InputSpec(type=approved)}, outputs={APPROVAL_OUTPUT: approved}
        )
    else:
        raise DefinitionError(f"{here}: a gate of kind {kind!r} is not supported")
    draft = TaskSpec(
        name=f"gate.{kind}.{options.signal_id or node.id}",
        version="",
        type=GATE_TYPE,
        interface=typed,
        custom=options.model_dump(mode="json"),
    )
    return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})


def _seconds(duration: Any) -> float:
    return float(duration.ToTimedelta().total_seconds())
