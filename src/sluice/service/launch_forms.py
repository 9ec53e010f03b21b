"""Launching from a form: the fields of a workflow's inputs (typed by its interface, filled
with the launch plan's defaults, its fixed inputs shown but not editable), their text parsed
back field by field so that each error is said next to its field, and the records a retry
reuses from the execution it retries."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from sluice.errors import InputError
from sluice.executions.launch import merge_inputs
from sluice.service.inputs import parse_scalar
from sluice.service.models import View
from sluice.spec.models import InputSpec, LaunchPlanSpec, WorkflowSpec
from sluice.spec.phases import NodePhase
from sluice.spec.types import TypeSpec, validate_json
from sluice.store.records import NodeRecord

Widget = Literal["text", "number", "boolean", "choice", "json"]
_SCALAR_TEXT = ("str", "int", "float", "datetime", "date", "enum", "bool")


class FormField(View):
    name: str
    type: str
    """The declared type as users read it: `int`, `list[str]`, `Color | None`."""
    widget: Widget
    choices: list[str] = []
    value: str = ""
    """The field's text: the value to launch with (a default, or what was typed)."""
    required: bool = True
    """No default: the field must be filled (an optional type may stay empty: None)."""
    optional: bool = False
    fixed: bool = False
    """Set by the launch plan: shown, never sent."""
    error: str = ""


class LaunchForm(View):
    workflow: str
    """`name@version`."""
    launch_plan: str | None = None
    launch_plan_version: str | None = None
    project: str
    domain: str
    fields: list[FormField]
    relaunch_of: str | None = None
    problem: str = ""
    """An error not of one field (a claim that could never be granted, ...)."""


class FormErrors(InputError):
    """Inputs refused field by field: `fields` maps each bad field to what is wrong."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        self.fields = dict(fields)
        super().__init__("; ".join(f"input {name!r}: {why}" for name, why in self.fields.items()))


def _base(spec: TypeSpec) -> TypeSpec:
    return spec.args[0] if spec.kind == "optional" else spec


def _widget(spec: TypeSpec) -> Widget:
    kind = _base(spec).kind
    if kind == "bool":
        return "boolean"
    if kind == "enum":
        return "choice"
    if kind in ("int", "float"):
        return "number"
    return "text" if kind in _SCALAR_TEXT else "json"


def as_text(spec: TypeSpec, value: Any) -> str:
    """A value as its field shows it: scalars as typed, anything else as JSON."""
    if value is None:
        return ""
    if _widget(spec) == "json":
        return json.dumps(value, indent=2, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_of(
    workflow: WorkflowSpec, plan: LaunchPlanSpec | None, prefill: Mapping[str, Any]
) -> list[FormField]:
    """One field per input: fixed ones with their value; the others with `prefill`'s value,
    else the launch plan's default, else the workflow's."""
    fixed = plan.fixed_inputs if plan else {}
    defaults = plan.default_inputs if plan else {}
    return [
        _field(name, declared, fixed, defaults, prefill)
        for name, declared in workflow.interface.inputs.items()
    ]


def _field(
    name: str,
    declared: InputSpec,
    fixed: Mapping[str, Any],
    defaults: Mapping[str, Any],
    prefill: Mapping[str, Any],
) -> FormField:
    spec = declared.type
    has_default = declared.has_default or name in defaults
    if name in fixed:
        value = fixed[name]
    elif name in prefill:
        value = prefill[name]
    elif name in defaults:
        value = defaults[name]
    else:
        value = declared.default if declared.has_default else None
    return FormField(
        name=name,
        type=str(spec),
        widget=_widget(spec),
        choices=[str(v) for v in _base(spec).values],
        value=as_text(spec, value),
        required=not has_default and spec.kind != "optional",
        optional=spec.kind == "optional",
        fixed=name in fixed,
    )


def parse_fields(
    workflow: WorkflowSpec, plan: LaunchPlanSpec | None, texts: Mapping[str, str]
) -> dict[str, Any]:
    """The inputs typed in a form, checked field by field (FormErrors names each bad one),
    then as a whole; fixed inputs are the launch plan's, whatever the form sent."""
    fixed = plan.fixed_inputs if plan else {}
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, declared in workflow.interface.inputs.items():
        if name in fixed or name not in texts:
            continue
        try:
            values[name] = _parse(name, declared.type, texts[name])
        except InputError as exc:
            errors[name] = _without_name(str(exc), name)
    unknown = sorted(set(texts) - set(workflow.interface.inputs))
    errors.update({name: "the workflow has no such input" for name in unknown})
    if errors:
        raise FormErrors(errors)
    merge_inputs(workflow, values, plan)  # what is missing or fixed, before anything is written
    return values


def _parse(name: str, spec: TypeSpec, text: str) -> Any:
    base = _base(spec)
    if not text.strip() and base.kind != "str":
        if spec.kind == "optional":
            return None
        raise InputError(f"input {name!r}: a value is needed ({spec})")
    if base.kind in _SCALAR_TEXT:
        value = parse_scalar(base.kind, text.strip() if base.kind != "str" else text, name)
    else:
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"input {name!r}: not JSON ({exc})") from None
    return validate_json(spec, value, f"input {name!r}")


def _without_name(message: str, name: str) -> str:
    """The error as its field says it (the field is named already)."""
    return message.replace(f"input {name!r}: ", "", 1)


def given_inputs(
    workflow: WorkflowSpec, plan: LaunchPlanSpec | None, inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """An execution's stored inputs as inputs to give again (its fixed ones are the plan's)."""
    fixed = plan.fixed_inputs if plan else {}
    known = workflow.interface.inputs
    return {k: v for k, v in inputs.items() if k not in fixed and k in known}


def reusable(
    nodes: list[NodeRecord], workflow: WorkflowSpec, old_id: str, new_id: str
) -> list[NodeRecord]:
    """The records a retry of execution `old_id` starts with: every workflow node that
    SUCCEEDED (with its recorded inputs and outputs), and what a compound one of them created
    (shown, not run again), as nodes of `new_id`. The others start afresh."""
    top = {n.id for n in workflow.nodes}
    done = {r.node_id for r in nodes if r.node_id in top and r.phase is NodePhase.SUCCEEDED}
    return [
        NodeRecord(
            execution_id=new_id,
            node_id=r.node_id,
            phase=NodePhase.SUCCEEDED,
            task_phase=r.task_phase,
            phase_version=r.phase_version,
            reason=f"reused from {old_id}/{r.node_id}",
            attempt=r.attempt,
            inputs=r.inputs,
            outputs=r.outputs,
            cache_status=r.cache_status,
            started_at=r.started_at,
            ended_at=r.ended_at,
            updated_at=r.updated_at,
            plugin_state=r.plugin_state,
        )
        for r in nodes
        if r.node_id in done or _created_by(r.node_id, done)
    ]


def _created_by(node_id: str, parents: set[str]) -> bool:
    """A child id of a compound node: `map[3]`, `dyn:build`, `dyn.inner` (spec/compound.py)."""
    return any(node_id.startswith((f"{p}[", f"{p}:", f"{p}.")) for p in parents)
