"""The JSON-typed values that cross task boundaries, and their type descriptions.

A `TypeSpec` describes a value in JSON terms so the engine can check inputs and bindings
without importing user code. Python objects are converted to and from JSON with pydantic's
TypeAdapter, in the process that has the annotations (the SDK and the task worker).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import json
import math
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from sluice.errors import DefinitionError, InputError, OutputsError
from sluice.spec.names import shown

TypeKind = Literal[
    "none",
    "bool",
    "int",
    "float",
    "str",
    "json",
    "list",
    "dict",
    "optional",
    "enum",
    "record",
    "datetime",
    "date",
    "file",
    "directory",
]


class TypeSpec(BaseModel):
    """A JSON-typed value: a scalar, a container of them, an enum or a record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: TypeKind
    args: tuple[TypeSpec, ...] = ()
    ref: str = ""
    values: tuple[str | int, ...] = ()
    fields: tuple[FieldSpec, ...] = ()

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list[{self.args[0]}]"
        if self.kind == "dict":
            return f"dict[str, {self.args[0]}]"
        if self.kind == "optional":
            return f"{self.args[0]} | None"
        if self.kind in ("enum", "record"):
            return self.ref.rpartition(":")[2] or self.kind
        return self.kind


class FieldSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: TypeSpec
    required: bool = True


class File(BaseModel):
    """A reference to a file by path or URI; the engine passes the reference, not the bytes."""

    model_config = ConfigDict(frozen=True)
    path: str


class Directory(BaseModel):
    """A reference to a directory by path or URI."""

    model_config = ConfigDict(frozen=True)
    path: str


_SCALARS: dict[Any, TypeKind] = {
    type(None): "none",
    None: "none",
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    dt.datetime: "datetime",
    dt.date: "date",
    File: "file",
    Directory: "directory",
}
JSON = TypeSpec(kind="json")


def _ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _record_fields(cls: type, where: str, within: frozenset[type]) -> tuple[FieldSpec, ...]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return tuple(
            FieldSpec(
                name=name,
                type=type_spec_of(field.annotation, f"{where} field {name!r}", within),
                required=field.is_required(),
            )
            for name, field in cls.model_fields.items()
        )
    hints = typing.get_type_hints(cls)
    return tuple(
        FieldSpec(
            name=f.name,
            type=type_spec_of(hints[f.name], f"{where} field {f.name!r}", within),
            required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(typing.cast(Any, cls))
    )


def type_spec_of(annotation: Any, where: str, within: frozenset[type] = frozenset()) -> TypeSpec:
    """Describe an annotation, or raise DefinitionError naming `where` if it is not JSON-typed.
    `within` holds the records being described, so a type that contains itself is refused."""
    if annotation in _SCALARS:
        return TypeSpec(kind=_SCALARS[annotation])
    if annotation in (list, typing.List):  # noqa: UP006
        return TypeSpec(kind="list", args=(JSON,))
    if annotation in (dict, typing.Dict):  # noqa: UP006
        return TypeSpec(kind="dict", args=(JSON,))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and len(args) == 1:
        return TypeSpec(kind="list", args=(type_spec_of(args[0], where, within),))
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            raise DefinitionError(f"{where}: dict keys must be str, got {args[0]!r}")
        return TypeSpec(kind="dict", args=(type_spec_of(args[1], where, within),))
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(args) == 2:
            return TypeSpec(kind="optional", args=(type_spec_of(others[0], where, within),))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = tuple(member.value for member in annotation)
        if not all(isinstance(v, str | int) for v in values):
            raise DefinitionError(f"{where}: enum {annotation.__name__} needs str or int values")
        return TypeSpec(kind="enum", ref=_ref(annotation), values=values)
    if isinstance(annotation, type) and (
        dataclasses.is_dataclass(annotation) or issubclass(annotation, BaseModel)
    ):
        if annotation in within:
            raise DefinitionError(
                f"{where}: {annotation.__name__} contains itself; recursive types are not "
                "JSON-typed values sluice can check"
            )
        fields = _record_fields(annotation, where, within | {annotation})
        return TypeSpec(kind="record", ref=_ref(annotation), fields=fields)
    raise DefinitionError(
        f"{where}: type {getattr(annotation, '__name__', annotation)!r} is not JSON-typed "
        "(use None, bool, int, float, str, list, dict, a dataclass, a pydantic model, "
        "datetime, date, an enum, File or Directory)"
    )


def is_assignable(source: TypeSpec, target: TypeSpec) -> bool:
    """Whether a value of type `source` may be bound to an input of type `target`."""
    if source == target or target.kind == "json":
        return True
    if target.kind == "optional":
        return source.kind == "none" or is_assignable(_unwrap(source), target.args[0])
    if source.kind == "int" and target.kind == "float":
        return True
    if source.kind == target.kind and source.kind in ("list", "dict"):
        return is_assignable(source.args[0], target.args[0])
    if source.kind == target.kind and source.kind in ("enum", "record"):
        return source.ref == target.ref
    return False


def _unwrap(spec: TypeSpec) -> TypeSpec:
    return spec.args[0] if spec.kind == "optional" else spec


class _Invalid(Exception):
    def __init__(self, path: str, expected: str, value: Any) -> None:
        if len(path) > 200:  # the path into a deep value: its start and its end
            path = f"{path[:100]}...{path[-60:]}"
        super().__init__(f"{path}: expected {expected}, got {shown(value)}")


MAX_DEPTH = 64
"""Deepest nesting of lists and dicts in a value; deeper ones overflow JSON encoders."""


def _check_plain_json(value: Any, path: str, depth: int) -> Any:
    """A value of an untyped (`json`) slot must still be JSON: checked without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, path, depth)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Invalid(where, f"at most {MAX_DEPTH} levels of nesting", "...")
        if isinstance(item, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise _Invalid(where, "an object with str keys", item)
            stack.extend((v, f"{where}[{k!r}]", depth + 1) for k, v in item.items())
        elif isinstance(item, float) and not math.isfinite(item):
            raise _Invalid(where, "a finite float (JSON has no NaN or Infinity)", item)
        elif item is not None and not isinstance(item, bool | int | float | str):
            raise _Invalid(where, "a JSON value", item)
    return value


def _check(spec: TypeSpec, value: Any, path: str, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise _Invalid(path, f"at most {MAX_DEPTH} levels of nesting", "...")
    kind = spec.kind
    if kind == "json":
        return _check_plain_json(value, path, depth)
    if kind == "optional":
        return None if value is None else _check(spec.args[0], value, path, depth)
    if kind == "none":
        if value is not None:
            raise _Invalid(path, "null", value)
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise _Invalid(path, "bool", value)
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(path, "int", value)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid(path, "float", value)
        if not math.isfinite(value):
            raise _Invalid(path, "a finite float (JSON has no NaN or Infinity)", value)
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise _Invalid(path, "str", value)
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise _Invalid(path, str(spec), value)
        return [
            _check(spec.args[0], item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)
        ]
    if kind == "dict":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _Invalid(path, str(spec), value)
        return {k: _check(spec.args[0], v, f"{path}[{k!r}]", depth + 1) for k, v in value.items()}
    if kind == "enum":
        if value not in spec.values or isinstance(value, bool):
            raise _Invalid(path, f"one of {list(spec.values)}", value)
        return value
    if kind in ("datetime", "date"):
        parse = dt.datetime.fromisoformat if kind == "datetime" else dt.date.fromisoformat
        try:
            return parse(value).isoformat()
        except (TypeError, ValueError):
            raise _Invalid(path, f"an ISO {kind} string", value) from None
    if kind in ("file", "directory"):
        if not (isinstance(value, dict) and isinstance(value.get("path"), str)):
            raise _Invalid(path, f'a {kind} reference {{"path": ...}}', value)
        if isinstance(value.get("hash"), str):  # its content's hash (flytekit's HashMethod)
            return {"path": value["path"], "hash": value["hash"]}
        return {"path": value["path"]}
    return _check_record(spec, value, path)


def _check_record(spec: TypeSpec, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise _Invalid(path, f"an object for {spec}", value)
    known = {f.name for f in spec.fields}
    unknown = sorted(set(value) - known)
    if unknown:
        raise _Invalid(f"{path}.{unknown[0]}", f"no such field in {spec}", value[unknown[0]])
    out = {}
    for field in spec.fields:
        if field.name in value:
            out[field.name] = _check(field.type, value[field.name], f"{path}.{field.name}", 1)
        elif field.required:
            raise _Invalid(f"{path}.{field.name}", "a value (required field)", None)
    return out


def validate_json(spec: TypeSpec, value: Any, path: str) -> Any:
    """Check a JSON value against `spec` and normalise it (ints to floats, ISO dates).

    Raises InputError naming `path` and what was expected.
    """
    try:
        return _check(spec, value, path)
    except _Invalid as exc:
        raise InputError(str(exc)) from None


@functools.lru_cache(maxsize=1024)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def to_json(annotation: Any, value: Any, where: str) -> Any:
    """Convert a Python value of `annotation` to its JSON form; OutputsError if it does not fit."""
    try:
        adapter = _adapter(annotation)
        result = adapter.dump_python(adapter.validate_python(value), mode="json")
        json.dumps(result, allow_nan=False)  # JSON has no NaN or Infinity
    except (ValidationError, TypeError, ValueError) as exc:
        raise OutputsError(f"{where}: {_first_error(exc)}") from None
    return result


def from_json(annotation: Any, value: Any, where: str) -> Any:
    """Build the Python value of `annotation` from its JSON form."""
    try:
        return _adapter(annotation).validate_python(value)
    except ValidationError as exc:
        raise InputError(f"{where}: {_first_error(exc)}") from None


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        loc = ".".join(str(p) for p in error["loc"])
        return f"{error['msg']}{' at ' + loc if loc else ''}, got {error.get('input')!r}"
    return str(exc)
