"""JSON-typed values: type descriptions, validation and normalisation, assignability,
conversion to and from Python, canonical JSON."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import typing
from typing import Any, NamedTuple, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sluice.errors import DefinitionError, InputError, OutputsError
from sluice.spec.canonical import canonical_json, digest
from sluice.spec.types import (
    JSON,
    Directory,
    FieldSpec,
    File,
    TypeSpec,
    from_json,
    is_assignable,
    to_json,
    type_spec_of,
    validate_json,
)

WHERE = "task 'demo' parameter 'x'"


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Ratio(enum.Enum):
    HALF = 0.5


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Event:
    name: str
    day: dt.date
    at: Optional[dt.datetime] = None  # noqa: UP045 - typing.Optional is a supported spelling
    colour: Colour = Colour.RED


class Model(BaseModel):
    id: int
    point: Point
    note: str | None = None


@dataclasses.dataclass
class HasSet:
    members: set[int]


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=list)


class Pair(NamedTuple):
    a: int
    b: int


def spec(kind: str, *args: TypeSpec) -> TypeSpec:
    return TypeSpec(kind=kind, args=args)  # type: ignore[arg-type]


INT, FLOAT, STR, BOOL, NONE = spec("int"), spec("float"), spec("str"), spec("bool"), spec("none")


# --- type_spec_of -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, NONE),
        (type(None), NONE),
        (bool, BOOL),
        (int, INT),
        (float, FLOAT),
        (str, STR),
        (dt.datetime, spec("datetime")),
        (dt.date, spec("date")),
        (File, spec("file")),
        (Directory, spec("directory")),
        (list, spec("list", JSON)),
        (dict, spec("dict", JSON)),
        (typing.List, spec("list", JSON)),  # noqa: UP006
        (typing.Dict, spec("dict", JSON)),  # noqa: UP006
        (list[int], spec("list", INT)),
        (dict[str, float], spec("dict", FLOAT)),
        (dict[str, list[int]], spec("dict", spec("list", INT))),
        (Optional[int], spec("optional", INT)),  # noqa: UP045
        (int | None, spec("optional", INT)),
        (None | str, spec("optional", STR)),
        (list[Optional[dt.date]], spec("list", spec("optional", spec("date")))),  # noqa: UP045
    ],
)
def test_type_spec_of_supported_kinds(annotation: Any, expected: TypeSpec) -> None:
    assert type_spec_of(annotation, WHERE) == expected


def test_type_spec_of_enums() -> None:
    colour = type_spec_of(Colour, WHERE)
    assert (colour.kind, colour.values) == ("enum", ("red", "green"))
    assert colour.ref == f"{__name__}:Colour"
    level = type_spec_of(Level, WHERE)
    assert (level.kind, level.values) == ("enum", (1, 2))
    assert str(colour) == "Colour"


def test_type_spec_of_dataclass_records_fields_and_required() -> None:
    point = type_spec_of(Point, WHERE)
    assert point.kind == "record"
    assert point.ref == f"{__name__}:Point"
    assert point.fields == (
        FieldSpec(name="x", type=INT, required=True),
        FieldSpec(name="y", type=FLOAT, required=False),
        FieldSpec(name="tags", type=spec("list", STR), required=False),
    )
    event = type_spec_of(Event, WHERE)
    assert [f.type.kind for f in event.fields] == ["str", "date", "optional", "enum"]


def test_type_spec_of_pydantic_model() -> None:
    model = type_spec_of(Model, WHERE)
    assert model.kind == "record"
    assert model.ref == f"{__name__}:Model"
    fields = {f.name: f for f in model.fields}
    assert fields["id"] == FieldSpec(name="id", type=INT, required=True)
    assert fields["point"].type == type_spec_of(Point, WHERE)
    assert fields["note"] == FieldSpec(name="note", type=spec("optional", STR), required=False)


@pytest.mark.parametrize(
    "annotation",
    [
        set,
        set[int],
        frozenset[str],
        tuple,
        tuple[int, str],
        dict[int, str],
        Union[int, str],  # noqa: UP007
        int | str | None,
        Any,
        bytes,
        complex,
        object,
        Pair,
    ],
    ids=repr,
)
def test_type_spec_of_refuses_non_json_types_naming_the_parameter(annotation: Any) -> None:
    with pytest.raises(DefinitionError) as caught:
        type_spec_of(annotation, WHERE)
    assert WHERE in str(caught.value)


def test_type_spec_of_refuses_a_non_json_field_naming_it() -> None:
    with pytest.raises(DefinitionError) as caught:
        type_spec_of(HasSet, WHERE)
    assert WHERE in str(caught.value)
    assert "'members'" in str(caught.value)


def test_type_spec_of_refuses_an_enum_of_floats() -> None:
    with pytest.raises(DefinitionError, match="Ratio"):
        type_spec_of(Ratio, WHERE)


def test_type_spec_of_a_recursive_dataclass_does_not_crash() -> None:
    """A self-referencing record must be described or refused with a DefinitionError naming
    the parameter, never blow the stack."""
    refusal = ""
    try:
        described = type_spec_of(Tree, WHERE)
    except DefinitionError as exc:
        refusal = str(exc)
    assert WHERE in refusal if refusal else described.kind == "record"


def test_type_spec_is_json_round_trippable() -> None:
    described = type_spec_of(dict[str, list[Optional[Event]]], WHERE)  # noqa: UP045
    assert TypeSpec.model_validate_json(described.model_dump_json()) == described


# --- validate_json -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (float, 3, 3.0),
        (float, 2.5, 2.5),
        (int, 3, 3),
        (bool, False, False),
        (str, "", ""),
        (type(None), None, None),
        (list[float], [1, 2.5], [1.0, 2.5]),
        (dict[str, float], {"a": 1}, {"a": 1.0}),
        (Optional[float], None, None),  # noqa: UP045
        (Optional[float], 2, 2.0),  # noqa: UP045
        (dt.datetime, "2024-01-02T03:04:05Z", "2024-01-02T03:04:05+00:00"),
        (dt.datetime, "2024-01-02 03:04:05", "2024-01-02T03:04:05"),
        (dt.datetime, "2024-01-02", "2024-01-02T00:00:00"),
        (dt.date, "2024-01-02", "2024-01-02"),
        (dt.date, "20240102", "2024-01-02"),
        (Colour, "green", "green"),
        (Level, 2, 2),
        (File, {"path": "s3://b/k"}, {"path": "s3://b/k"}),
        (Directory, {"path": "/tmp"}, {"path": "/tmp"}),
        (dict, {"any": [1, {"thing": None}]}, {"any": [1, {"thing": None}]}),
        (Point, {"x": 1}, {"x": 1}),
        (Point, {"x": 1, "y": 2, "tags": ["a"]}, {"x": 1, "y": 2.0, "tags": ["a"]}),
        (
            Event,
            {"name": "n", "day": "2024-03-04", "at": "2024-03-04T05:06:07.000000+01:00"},
            {"name": "n", "day": "2024-03-04", "at": "2024-03-04T05:06:07+01:00"},
        ),
        (Model, {"id": 1, "point": {"x": 2}}, {"id": 1, "point": {"x": 2}}),
    ],
)
def test_validate_json_accepts_and_normalises(annotation: Any, value: Any, expected: Any) -> None:
    result = validate_json(type_spec_of(annotation, WHERE), value, "inputs.x")
    assert canonical_json(result) == canonical_json(expected)


@pytest.mark.parametrize(
    ("annotation", "value", "path"),
    [
        (int, 3.0, "inputs.x"),
        (int, True, "inputs.x"),
        (int, "3", "inputs.x"),
        (float, True, "inputs.x"),
        (float, "1.5", "inputs.x"),
        (bool, 1, "inputs.x"),
        (str, 5, "inputs.x"),
        (type(None), 0, "inputs.x"),
        (list[int], (1, 2), "inputs.x"),
        (list[int], [1, "two"], "inputs.x[1]"),
        (dict[str, int], {"a": 1, "b": "x"}, "inputs.x['b']"),
        (dict[str, int], {1: 1}, "inputs.x"),
        (dt.datetime, "yesterday", "inputs.x"),
        (dt.datetime, 1700000000, "inputs.x"),
        (dt.date, "2024-01-02T03:04:05", "inputs.x"),
        (Colour, "RED", "inputs.x"),
        (Level, True, "inputs.x"),
        (File, "/a/b", "inputs.x"),
        (File, {"path": 3}, "inputs.x"),
        (Point, [1], "inputs.x"),
        (Point, {}, "inputs.x.x"),
        (Point, {"x": 1, "z": 2}, "inputs.x.z"),
        (Point, {"x": 1, "tags": [1]}, "inputs.x.tags[0]"),
        (Model, {"id": 1, "point": {"x": "no"}}, "inputs.x.point.x"),
    ],
)
def test_validate_json_errors_name_the_path(annotation: Any, value: Any, path: str) -> None:
    with pytest.raises(InputError) as caught:
        validate_json(type_spec_of(annotation, WHERE), value, "inputs.x")
    assert str(caught.value).startswith(f"{path}: expected ")


def test_validate_json_error_says_what_was_expected_and_what_came() -> None:
    with pytest.raises(InputError) as caught:
        validate_json(type_spec_of(list[int], WHERE), [1, "two"], "inputs.xs")
    assert str(caught.value) == "inputs.xs[1]: expected int, got 'two'"


# --- is_assignable -------------------------------------------------------------------------

OPT_INT, OPT_FLOAT = spec("optional", INT), spec("optional", FLOAT)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        (INT, INT, True),
        (INT, FLOAT, True),
        (FLOAT, INT, False),
        (BOOL, INT, False),
        (STR, INT, False),
        (INT, JSON, True),
        (spec("list", INT), JSON, True),
        (JSON, INT, False),
        (NONE, OPT_INT, True),
        (INT, OPT_INT, True),
        (INT, OPT_FLOAT, True),
        (OPT_INT, OPT_FLOAT, True),
        (OPT_INT, INT, False),
        (STR, OPT_INT, False),
        (spec("list", INT), spec("list", FLOAT), True),
        (spec("list", FLOAT), spec("list", INT), False),
        (spec("list", INT), spec("list", JSON), True),
        (spec("list", INT), spec("dict", INT), False),
        (spec("dict", INT), spec("dict", OPT_FLOAT), True),
        (spec("dict", STR), spec("dict", INT), False),
        (spec("date"), spec("datetime"), False),
        (spec("file"), spec("directory"), False),
    ],
)
def test_is_assignable(source: TypeSpec, target: TypeSpec, expected: bool) -> None:
    assert is_assignable(source, target) is expected


def test_is_assignable_records_and_enums_match_by_reference() -> None:
    point, event = type_spec_of(Point, WHERE), type_spec_of(Event, WHERE)
    colour, level = type_spec_of(Colour, WHERE), type_spec_of(Level, WHERE)
    assert is_assignable(point, point)
    assert not is_assignable(point, event)
    assert is_assignable(colour, spec("optional", colour))
    assert not is_assignable(colour, level)
    same_ref_other_fields = point.model_copy(update={"fields": ()})
    assert is_assignable(same_ref_other_fields, point)


# --- to_json / from_json --------------------------------------------------------------------

UTC = dt.UTC
ROUND_TRIPS: list[tuple[Any, Any]] = [
    (int, 3),
    (float, 1.25),
    (str, "héllo"),
    (bool, True),
    (type(None), None),
    (list[int], [1, 2, 3]),
    (dict[str, dt.date], {"a": dt.date(2024, 2, 29)}),
    (Optional[int], None),  # noqa: UP045
    (dt.datetime, dt.datetime(2024, 1, 2, 3, 4, 5, 600, tzinfo=UTC)),
    (dt.datetime, dt.datetime(2024, 1, 2, 3, 4, 5)),
    (dt.datetime, dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=-7)))),
    (dt.date, dt.date(1999, 12, 31)),
    (Colour, Colour.GREEN),
    (Level, Level.HIGH),
    (File, File(path="/data/in.csv")),
    (Directory, Directory(path="s3://bucket/prefix/")),
    (Point, Point(1, 2.5, ["a", "b"])),
    (Event, Event("launch", dt.date(2024, 5, 6), dt.datetime(2024, 5, 6, 7, tzinfo=UTC))),
    (Model, Model(id=1, point=Point(3), note="n")),
    (list[Point], [Point(1), Point(2, 3.0)]),
    (dict, {"nested": [1, "two", None, {"three": 3.5}]}),
]


@pytest.mark.parametrize(("annotation", "value"), ROUND_TRIPS, ids=repr)
def test_to_json_from_json_round_trip(annotation: Any, value: Any) -> None:
    encoded = to_json(annotation, value, "output 'o0'")
    assert json.loads(json.dumps(encoded)) == encoded  # plain JSON
    assert from_json(annotation, encoded, "input 'x'") == value


@pytest.mark.parametrize(("annotation", "value"), ROUND_TRIPS, ids=repr)
def test_to_json_output_passes_the_engine_check(annotation: Any, value: Any) -> None:
    """What the SDK writes, the engine accepts (validate_json), and the worker reads back."""
    described = type_spec_of(annotation, WHERE)
    checked = validate_json(described, to_json(annotation, value, "o0"), "o0")
    assert from_json(annotation, checked, "x") == value


def test_to_json_refuses_values_that_do_not_fit() -> None:
    with pytest.raises(OutputsError) as caught:
        to_json(int, "abc", "task 't' output 'o0'")
    assert "task 't' output 'o0'" in str(caught.value)
    assert "'abc'" in str(caught.value)
    with pytest.raises(OutputsError, match="output 'o0'"):
        to_json(dict, {"a": object()}, "output 'o0'")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_to_json_refuses_non_finite_floats(value: float) -> None:
    """NaN and infinities are not JSON: canonical_json (cache keys) cannot encode them."""
    with pytest.raises(OutputsError):
        to_json(float, value, "task 't' output 'o0'")


def test_from_json_errors_name_where() -> None:
    with pytest.raises(InputError) as caught:
        from_json(Point, {"x": "one"}, "task 't' input 'p'")
    assert "task 't' input 'p'" in str(caught.value)


# --- canonical JSON --------------------------------------------------------------------------


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    value = {"b": 1, "a": [1.5, "é", None, True], "c": {"z": 0, "y": {}}}
    assert canonical_json(value) == '{"a":[1.5,"é",null,true],"b":1,"c":{"y":{},"z":0}}'


def test_canonical_json_is_independent_of_key_order() -> None:
    assert canonical_json({"a": 1, "b": {"c": 2, "d": 3}}) == canonical_json(
        {"b": {"d": 3, "c": 2}, "a": 1}
    )
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert len(digest("x")) == 64


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON"):
        canonical_json({"x": float("nan")})


# --- properties --------------------------------------------------------------------------------

_leaf_specs = st.sampled_from(
    [NONE, BOOL, INT, FLOAT, STR, JSON]
    + [spec(kind) for kind in ("datetime", "date", "file", "directory")]
) | st.lists(st.text(max_size=3), min_size=1, max_size=3, unique=True).map(
    lambda values: TypeSpec(kind="enum", ref="m:E", values=tuple(values))
)


def _records(children: st.SearchStrategy[TypeSpec]) -> st.SearchStrategy[TypeSpec]:
    fields = st.lists(
        st.tuples(st.text(min_size=1, max_size=4), children, st.booleans()),
        max_size=3,
        unique_by=lambda f: f[0],
    )
    return fields.map(
        lambda items: TypeSpec(
            kind="record",
            ref="m:R",
            fields=tuple(FieldSpec(name=n, type=t, required=r) for n, t, r in items),
        )
    )


type_specs = st.recursive(
    _leaf_specs,
    lambda children: st.one_of(
        children.map(lambda s: spec("list", s)),
        children.map(lambda s: spec("dict", s)),
        children.filter(lambda s: s.kind != "optional").map(lambda s: spec("optional", s)),
        _records(children),
    ),
    max_leaves=6,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)

_zones = st.sampled_from([None, dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30))])


def values_of(described: TypeSpec) -> st.SearchStrategy[Any]:
    """JSON values that a TypeSpec accepts, in the various forms clients send."""
    kind = described.kind
    simple: dict[str, st.SearchStrategy[Any]] = {
        "none": st.none(),
        "bool": st.booleans(),
        "int": st.integers(),
        "float": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "str": st.text(max_size=5),
        "json": json_values,
        "date": st.dates().map(lambda d: d.isoformat()),
        "datetime": st.builds(
            lambda moment, zone, spec_: moment.replace(tzinfo=zone).isoformat(timespec=spec_),
            st.datetimes(),
            _zones,
            st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"]),
        ),
        "file": st.fixed_dictionaries({"path": st.text(max_size=5)}),
        "directory": st.fixed_dictionaries({"path": st.text(max_size=5)}),
    }
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return st.sampled_from(described.values)
    if kind == "list":
        return st.lists(values_of(described.args[0]), max_size=3)
    if kind == "dict":
        return st.dictionaries(st.text(max_size=3), values_of(described.args[0]), max_size=3)
    if kind == "optional":
        return st.none() | values_of(described.args[0])
    return st.fixed_dictionaries(
        {f.name: values_of(f.type) for f in described.fields if f.required},
        optional={f.name: values_of(f.type) for f in described.fields if not f.required},
    )


@st.composite
def specs_with_values(draw: st.DrawFn) -> tuple[TypeSpec, Any]:
    described = draw(type_specs)
    return described, draw(values_of(described))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs_with_values())
def test_validate_json_is_idempotent_on_accepted_values(case: tuple[TypeSpec, Any]) -> None:
    described, value = case
    once = validate_json(described, value, "v")
    twice = validate_json(described, once, "v")
    assert canonical_json(twice) == canonical_json(once)


@settings(max_examples=200, deadline=None)
@given(type_specs, json_values)
def test_validate_json_is_idempotent_or_refuses(described: TypeSpec, value: Any) -> None:
    try:
        once = validate_json(described, value, "v")
    except InputError:
        return
    assert canonical_json(validate_json(described, once, "v")) == canonical_json(once)


def _shuffled(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, dict):
        keys = draw(st.permutations(list(value)))
        return {k: _shuffled(value[k], draw) for k in keys}
    if isinstance(value, list):
        return [_shuffled(item, draw) for item in value]
    return value


@st.composite
def equal_dicts(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    original = draw(st.dictionaries(st.text(max_size=4), json_values, max_size=6))
    return original, _shuffled(original, draw)


@settings(max_examples=100, deadline=None)
@given(equal_dicts())
def test_canonical_json_of_equal_dicts_with_shuffled_keys_is_equal(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    original, shuffled = pair
    assert original == shuffled
    assert canonical_json(original) == canonical_json(shuffled)
    assert digest(original) == digest(shuffled)
    assert canonical_json(json.loads(canonical_json(original))) == canonical_json(original)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_validate_json_refuses_non_finite_floats(value: float) -> None:
    """`json.loads` accepts NaN and Infinity; the engine must refuse them as inputs instead of
    failing later when it computes a cache key."""
    with pytest.raises(InputError, match=r"inputs\.x"):
        validate_json(FLOAT, value, "inputs.x")
