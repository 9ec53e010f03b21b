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
        return follow_path(inputs[binding.name], binding.path, f"input {binding.name!r}")
    if binding.kind == "output":
        produced = outputs.get(binding.node) or {}
        if binding.output not in produced:
            raise InputError(f"node {binding.node!r} produced no output {binding.output!r}")
        where = f"node {binding.node!r} output {binding.output!r}"
        return follow_path(produced[binding.output], binding.path, where)
    if binding.kind == "constant":
        return binding.value
    values = [resolve(item, inputs, outputs) for item in binding.items]
    if binding.kind == "list":
        return values
    return dict(zip(binding.keys, values, strict=True))


def follow_path(value: Any, path: tuple[str | int, ...], where: str) -> Any:
    """The part of `value` a binding's attribute path names (`o0.x`, `o0[0]`, `o0["k"]`)."""
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise InputError(f"{where}: has no {step!r} (attribute path {list(path)})") from None
    return value


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
