"""Typed interfaces from Python signatures, and conversion of values at task boundaries."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from sluice.errors import DefinitionError, OutputsError
from sluice.spec.models import InputSpec, Interface
from sluice.spec.types import TypeSpec, from_json, to_json, type_spec_of


def _is_named_tuple(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, tuple)
        and hasattr(annotation, "_fields")
    )


def output_annotations(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    """Output names and annotations: none for None, o0..oN for a tuple, fields of a
    NamedTuple, else a single `o0`."""
    hints = typing.get_type_hints(fn)
    if "return" not in hints:
        raise DefinitionError(f"{where}: the return type is not annotated (use -> None for none)")
    annotation = hints["return"]
    if annotation is None or annotation is type(None):
        return {}
    if _is_named_tuple(annotation):
        return dict(typing.get_type_hints(annotation))
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if not args or args[-1] is Ellipsis:
            raise DefinitionError(f"{where}: a tuple return needs a fixed list of element types")
        return {f"o{i}": arg for i, arg in enumerate(args)}
    return {"o0": annotation}


def input_annotations(fn: Callable[..., Any], where: str) -> dict[str, inspect.Parameter]:
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params: dict[str, inspect.Parameter] = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(f"{where}: *args and **kwargs are not supported ({name!r})")
        if name not in hints:
            raise DefinitionError(f"{where}: parameter {name!r} has no type annotation")
        params[name] = param.replace(annotation=hints[name])
    return params


def build_interface(fn: Callable[..., Any], where: str) -> Interface:
    return Interface(inputs=build_inputs(fn, where), outputs=build_outputs(fn, where))


def build_inputs(fn: Callable[..., Any], where: str) -> dict[str, InputSpec]:
    inputs = {}
    for name, param in input_annotations(fn, where).items():
        spec = type_spec_of(param.annotation, f"{where} parameter {name!r}")
        has_default = param.default is not inspect.Parameter.empty
        default = None
        if has_default:
            try:
                default = to_json(param.annotation, param.default, f"{where} parameter {name!r}")
            except OutputsError as exc:
                raise DefinitionError(f"default value of {exc}") from None
        inputs[name] = InputSpec(type=spec, default=default, has_default=has_default)
    return inputs


def build_outputs(fn: Callable[..., Any], where: str) -> dict[str, TypeSpec]:
    return {
        name: type_spec_of(annotation, f"{where} output {name!r}")
        for name, annotation in output_annotations(fn, where).items()
    }


def bind_arguments(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """Map positional and keyword arguments to parameter names, naming any that do not fit."""
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except TypeError as exc:
        raise DefinitionError(f"{where}: {exc}") from None
    return dict(bound.arguments)


def decode_inputs(
    params: Mapping[str, inspect.Parameter], values: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """JSON inputs to the Python values the function expects."""
    return {
        name: from_json(params[name].annotation, value, f"{where} input {name!r}")
        for name, value in values.items()
        if name in params
    }


def encode_outputs(annotations: Mapping[str, Any], result: Any, where: str) -> dict[str, Any]:
    """A function's return value to JSON outputs; OutputsError if it does not fit."""
    if not annotations:
        return {}
    if len(annotations) == 1 and "o0" in annotations:
        values = {"o0": result}
    elif isinstance(result, tuple) and len(result) == len(annotations):
        values = dict(zip(annotations, result, strict=True))
    else:
        raise OutputsError(f"{where}: expected {len(annotations)} outputs, got {result!r}")
    return {
        name: to_json(annotations[name], value, f"{where} output {name!r}")
        for name, value in values.items()
    }
