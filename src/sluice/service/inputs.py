"""Workflow inputs from the command line: `--input k=v` typed by the interface, or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.errors import InputError
from sluice.spec.models import WorkflowSpec
from sluice.spec.names import shown

_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def _refuse_constant(name: str) -> Any:
    raise InputError(f"JSON has no {name}: inputs are JSON values")


def _loads(text: str) -> Any:
    """JSON as the standard defines it: NaN and Infinity are refused, not read as floats."""
    return json.loads(text, parse_constant=_refuse_constant)


def parse_scalar(kind: str, text: str, name: str) -> Any:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise InputError(f"input {name!r}: expected {kind}, got {shown(text)}") from None
    if kind == "bool":
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise InputError(f"input {name!r}: expected true or false, got {shown(text)}")
    if kind in ("str", "datetime", "date", "enum"):
        return text
    try:
        return _loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(f"input {name!r}: expected JSON, got {shown(text)}") from None


def parse_inputs(
    workflow: WorkflowSpec, pairs: Sequence[str], as_json: str | None
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if as_json:
        try:
            loaded = _loads(as_json)
        except json.JSONDecodeError as exc:
            raise InputError(f"--inputs is not JSON: {exc}") from None
        except RecursionError:
            raise InputError(f"--inputs is nested too deeply: {shown(as_json)}") from None
        if not isinstance(loaded, dict):
            raise InputError(f"--inputs must be a JSON object, got {shown(as_json)}")
        values.update(loaded)
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise InputError(f"--input {pair!r} is not NAME=VALUE")
        declared = workflow.interface.inputs.get(name)
        if declared is None:
            raise InputError(
                f"{workflow.name!r} has no input {name!r}; inputs are "
                f"{sorted(workflow.interface.inputs)}"
            )
        kind = (
            declared.type.args[0].kind if declared.type.kind == "optional" else declared.type.kind
        )
        values[name] = parse_scalar(kind, text, name)
    return values


@dataclass(frozen=True)
class InputText:
    """Inputs as a user typed them: `NAME=VALUE` pairs (typed by the interface) and a JSON
    object; parsed once the workflow they are for is known."""

    pairs: Sequence[str] = ()
    json: str | None = None


Inputs = Mapping[str, Any] | InputText
"""JSON values by name, or text still to parse against the interface."""


def resolve_inputs(workflow: WorkflowSpec, given: Inputs) -> dict[str, Any]:
    if isinstance(given, InputText):
        return parse_inputs(workflow, given.pairs, given.json)
    return dict(given)
