"""Gate nodes (Flyte's `sleep`, `wait_for_input` and `approve`): a node that runs no task but
waits, in the store, for time to pass or for a value to be signalled.

A gate's task has type `gate` and its `custom` holds GateOptions. The engine steps it
(engine/gates.py) without a plugin, a slot or a quota: a sleep ends `duration` seconds after
the node started; a signal gate ends with the first value signalled for it (`sluice
executions signal EXEC NODE VALUE`, the API), that value its output; an approve gate passes
its input through once approved (true), and fails when rejected (false). A signal or approve
gate that waits longer than `timeout` fails. Signals are events of the node (phase
SIGNALED_EVENT), so a gate's wait and its answer survive any restart and stay in the history.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sluice.spec.models import SpecModel, TaskSpec
from sluice.spec.types import TypeSpec

GATE_TYPE = "gate"
SIGNALED_EVENT = "SIGNALED"
"""The phase of the event that carries a signalled value ({"value": ...} in its info)."""
APPROVAL_OUTPUT = "o0"
"""An approve gate's one input and output: the value it lets through."""


class GateOptions(SpecModel):
    kind: Literal["sleep", "signal", "approve"]
    duration: float = Field(default=0.0, ge=0.0)
    """Of a sleep: seconds from the node's start."""
    signal_id: str = ""
    """Of a signal or approve gate: the name it is known by (Flyte's signal id)."""
    output: str = ""
    """Of a signal gate: the output the signalled value becomes."""
    type: TypeSpec | None = None
    """Of a signal gate: the type of the value it waits for (an approve gate's is bool)."""
    timeout: float | None = Field(default=None, gt=0.0)
    """Of a signal or approve gate: seconds from the node's start before it fails."""

    def waiting_reason(self) -> str:
        if self.kind == "sleep":
            return f"sleeping {self.duration:g} s"
        if self.kind == "approve":
            return f"waiting for approval {self.signal_id!r}"
        return f"waiting for input {self.signal_id!r} ({self.type})"

    def value_type(self) -> TypeSpec:
        """The type of the value a signal must carry."""
        if self.kind == "approve" or self.type is None:
            return TypeSpec(kind="bool")
        return self.type


def is_gate(task: TaskSpec) -> bool:
    return task.type == GATE_TYPE


def gate_options(task: TaskSpec) -> GateOptions:
    return GateOptions.model_validate(task.custom)
