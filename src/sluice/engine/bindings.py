"""Resolve a node's inputs and an execution's outputs from bindings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import InputError
from sluice.spec.models import Binding, Interface
from sluice.spec.types import validate_json


def resolve(
    binding: Binding, inputs: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any] | None]
) -> Any:
    """The JSON value of a binding, given the execution's inputs and finished nodes' outputs."""
    if binding.kind == "input":
        return inputs[binding.name]
    if binding.kind == "output":
        produced = outputs.get(binding.node) or {}
        if binding.output not in produced:
            raise InputError(f"node {binding.node!r} produced no output {binding.output!r}")
        return produced[binding.output]
    if binding.kind == "constant":
        return binding.value
    values = [resolve(item, inputs, outputs) for item in binding.items]
    if binding.kind == "list":
        return values
    return dict(zip(binding.keys, values, strict=True))


def resolve_inputs(
    interface: Interface,
    bindings: Mapping[str, Binding],
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Mapping[str, Any] | None],
    where: str,
) -> dict[str, Any]:
    """A task's inputs: bound values and defaults, each checked against the interface."""
    values: dict[str, Any] = {}
    for name, declared in interface.inputs.items():
        if name in bindings:
            raw = resolve(bindings[name], inputs, outputs)
        elif declared.has_default:
            raw = declared.default
        else:
            raise InputError(f"{where}: input {name!r} is not bound")
        values[name] = validate_json(declared.type, raw, f"{where} input {name!r}")
    return values


def check_outputs(
    interface: Interface, values: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    """The outputs a task wrote, checked against its interface; InputError names the bad one."""
    values = dict(values or {})
    missing = sorted(set(interface.outputs) - set(values))
    if missing:
        raise InputError(f"{where}: output {missing[0]!r} was not written")
    return {
        name: validate_json(spec, values[name], f"{where} output {name!r}")
        for name, spec in interface.outputs.items()
    }
