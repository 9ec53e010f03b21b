"""Flyte's literal types and literals (flyteidl protobuf) <-> sluice's JSON types and values.

Supported: the primitives (int, float, str, bool, datetime, duration as float seconds), none,
collections, maps with str keys, enums, optionals (a union of one type and none), files,
directories and structured datasets by reference (`{"path": uri}`; a value whose literal
carries a hash, flytekit's `HashMethod`, keeps it as `{"path": uri, "hash": h}`), and
flytekit's structs (dataclasses, pydantic models, untyped dicts: a STRUCT type carried as
msgpack bytes, or as a protobuf Struct by older flytekits) as JSON objects. Anything else raises a
DefinitionError naming the variable, at translation: a workflow sluice cannot carry values for
is refused before it runs.

Imports flyteidl lazily, so that sluice without the `flyte` extra never loads it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sluice.errors import DefinitionError, InputError, OutputsError
from sluice.spec.types import TypeSpec

# flyteidl.core.types_pb2.SimpleType values
_SIMPLE: dict[int, str] = {0: "none", 1: "int", 2: "float", 3: "str", 4: "bool", 5: "datetime"}
_DURATION = 6
_ERROR = 8
_STRUCT = 9
_MSGPACK = "msgpack"
_MULTIPART = 1  # BlobType.BlobDimensionality.MULTIPART


def type_spec(literal_type: Any, where: str) -> TypeSpec:
    """The sluice type of a flyteidl LiteralType; DefinitionError naming `where` if none fits."""
    kind = literal_type.WhichOneof("type")
    if kind == "simple":
        return _simple(literal_type.simple, where)
    if kind == "collection_type":
        return TypeSpec(kind="list", args=(type_spec(literal_type.collection_type, where),))
    if kind == "map_value_type":
        return TypeSpec(kind="dict", args=(type_spec(literal_type.map_value_type, where),))
    if kind == "blob":
        multipart = literal_type.blob.dimensionality == _MULTIPART
        return TypeSpec(kind="directory" if multipart else "file")
    if kind == "structured_dataset_type":
        return TypeSpec(kind="directory")
    if kind == "enum_type":
        return TypeSpec(kind="enum", values=tuple(literal_type.enum_type.values))
    if kind == "union_type":
        return _optional(literal_type.union_type.variants, where)
    raise DefinitionError(f"{where}: Flyte type {kind or 'unset'!r} is not supported by sluice")


def _simple(simple: int, where: str) -> TypeSpec:
    if simple == _DURATION:
        return TypeSpec(kind="float")  # seconds
    if simple in (_STRUCT, _ERROR):  # a dataclass, a pydantic model, an untyped dict; an error
        return TypeSpec(kind="json")
    if simple not in _SIMPLE:
        raise DefinitionError(
            f"{where}: Flyte simple type {simple} is not supported by sluice (dataclasses, dicts "
            "without a value type and binary values are not yet)"
        )
    return TypeSpec(kind=_SIMPLE[simple])


def _optional(variants: Any, where: str) -> TypeSpec:
    others = [v for v in variants if not (v.WhichOneof("type") == "simple" and v.simple == 0)]
    if len(others) != 1 or len(variants) != 2:
        raise DefinitionError(
            f"{where}: Flyte unions other than Optional[T] are not supported by sluice"
        )
    return TypeSpec(kind="optional", args=(type_spec(others[0], where),))


def is_error_type(literal_type: Any) -> bool:
    """A FlyteError, or an Optional of one (an on_failure task's error input)."""
    kind = literal_type.WhichOneof("type")
    if kind == "union_type":
        return any(is_error_type(v) for v in literal_type.union_type.variants)
    return kind == "simple" and bool(literal_type.simple == _ERROR)


def to_json(literal: Any, literal_type: Any, where: str) -> Any:
    """A flyteidl Literal as the JSON value of `literal_type`."""
    kind = literal.WhichOneof("value")
    if kind == "collection":
        item_type = literal_type.collection_type
        return [
            to_json(v, item_type, f"{where}[{i}]")
            for i, v in enumerate(literal.collection.literals)
        ]
    if kind == "map":
        value_type = literal_type.map_value_type
        return {
            k: to_json(v, value_type, f"{where}[{k!r}]") for k, v in literal.map.literals.items()
        }
    if kind != "scalar":
        raise OutputsError(f"{where}: a Flyte literal of kind {kind!r} is not supported")
    found = _scalar_json(literal.scalar, literal_type, where)
    if literal.hash and isinstance(found, dict) and "path" in found:
        return {**found, "hash": literal.hash}  # flytekit's HashMethod: the cache key's part
    return found


def _scalar_json(scalar: Any, literal_type: Any, where: str) -> Any:
    kind = scalar.WhichOneof("value")
    if kind == "primitive":
        return _primitive_json(scalar.primitive)
    if kind == "none_type":
        return None
    if kind == "blob":
        return {"path": scalar.blob.uri}
    if kind == "structured_dataset":
        return {"path": scalar.structured_dataset.uri}
    if kind == "union":
        return to_json(scalar.union.value, scalar.union.type, where)
    if kind == "binary" and scalar.binary.tag == _MSGPACK:
        import msgpack  # type: ignore[import-untyped]  # flytekit depends on it

        return msgpack.unpackb(scalar.binary.value, strict_map_key=False)
    if kind == "generic":
        from google.protobuf import json_format

        return json_format.MessageToDict(scalar.generic)
    if kind == "error":
        return {"failed_node_id": scalar.error.failed_node_id, "message": scalar.error.message}
    raise OutputsError(f"{where}: a Flyte scalar of kind {kind!r} is not supported")


def _primitive_json(primitive: Any) -> Any:
    kind = primitive.WhichOneof("value")
    if kind == "datetime":
        return primitive.datetime.ToDatetime(tzinfo=dt.UTC).isoformat()
    if kind == "duration":
        return primitive.duration.ToTimedelta().total_seconds()
    return getattr(primitive, kind)


def literal_map(values: dict[str, Any], variables: Any) -> Any:
    """A flyteidl LiteralMap of JSON `values`, typed by a VariableMap's variables."""
    from flyteidl.core import literals_pb2

    out = literals_pb2.LiteralMap()
    for name, value in values.items():
        out.literals[name].CopyFrom(to_literal(value, variables[name].type, f"input {name!r}"))
    return out


def _hashed(literal: Any, value: Any) -> Any:
    """A file, directory or dataset literal with the hash its value kept (HashMethod)."""
    if isinstance(value, dict) and value.get("hash"):
        literal.hash = str(value["hash"])
    return literal


def to_literal(value: Any, literal_type: Any, where: str) -> Any:
    """The flyteidl Literal of a JSON value of `literal_type`."""
    from flyteidl.core import literals_pb2 as lit

    kind = literal_type.WhichOneof("type")
    if kind == "collection_type":
        items = [
            to_literal(v, literal_type.collection_type, f"{where}[{i}]")
            for i, v in enumerate(value)
        ]
        return lit.Literal(collection=lit.LiteralCollection(literals=items))
    if kind == "map_value_type":
        pairs = {
            k: to_literal(v, literal_type.map_value_type, f"{where}[{k!r}]")
            for k, v in value.items()
        }
        return lit.Literal(map=lit.LiteralMap(literals=pairs))
    return _hashed(lit.Literal(scalar=_scalar(value, literal_type, kind, where)), value)


def _scalar(value: Any, literal_type: Any, kind: str, where: str) -> Any:
    from flyteidl.core import literals_pb2 as lit

    if kind == "simple":
        return _simple_scalar(value, literal_type.simple)
    if kind == "blob":
        return lit.Scalar(
            blob=lit.Blob(uri=value["path"], metadata=lit.BlobMetadata(type=literal_type.blob))
        )
    if kind == "structured_dataset_type":
        meta = lit.StructuredDatasetMetadata(
            structured_dataset_type=literal_type.structured_dataset_type
        )
        return lit.Scalar(
            structured_dataset=lit.StructuredDataset(uri=value["path"], metadata=meta)
        )
    if kind == "enum_type":
        return lit.Scalar(primitive=lit.Primitive(string_value=str(value)))
    if kind == "union_type":
        return _union(value, literal_type.union_type.variants, where)
    raise InputError(f"{where}: Flyte type {kind!r} is not supported by sluice")


def _simple_scalar(value: Any, simple: int) -> Any:
    from flyteidl.core import literals_pb2 as lit

    if value is None or simple == 0:
        return lit.Scalar(none_type=lit.Void())
    if simple == _STRUCT:
        import msgpack  # flytekit depends on it

        return lit.Scalar(binary=lit.Binary(value=msgpack.packb(value), tag=_MSGPACK))
    if simple == _ERROR:
        from flyteidl.core import types_pb2

        failed = str(value.get("failed_node_id", ""))
        error = types_pb2.Error(failed_node_id=failed, message=str(value.get("message", "")))
        return lit.Scalar(error=error)
    primitive = lit.Primitive()
    if simple == 1:
        primitive.integer = value
    elif simple == 2:
        primitive.float_value = value
    elif simple == 3:
        primitive.string_value = value
    elif simple == 4:
        primitive.boolean = value
    elif simple == 5:
        primitive.datetime.FromDatetime(_utc(dt.datetime.fromisoformat(value)))
    else:
        primitive.duration.FromTimedelta(dt.timedelta(seconds=value))
    return lit.Scalar(primitive=primitive)


def _utc(moment: dt.datetime) -> dt.datetime:
    """Protobuf timestamps are UTC: a naive datetime is taken as UTC, an aware one converted."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def _union(value: Any, variants: Any, where: str) -> Any:
    """An Optional's value: the none variant for None, the other one otherwise. The stored
    type is the variant as declared (with its structure tag), which flytekit matches on."""
    from flyteidl.core import literals_pb2 as lit

    is_none = [v.WhichOneof("type") == "simple" and v.simple == 0 for v in variants]
    chosen = next(v for v, none in zip(variants, is_none, strict=True) if none == (value is None))
    inner = to_literal(value, chosen, where)
    return lit.Scalar(union=lit.Union(value=inner, type=chosen))
