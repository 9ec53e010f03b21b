"""Cache keys and output checks: what changes a key, what must not, and bad values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sluice.cache import CacheEntry, CacheSource, cache_key, checked_outputs
from sluice.errors import InputError, OutputsError
from sluice.spec.models import CacheSpec, InputSpec, Interface, TaskMetadata, TaskSpec
from sluice.spec.types import TypeSpec

INT, FLOAT, STR = TypeSpec(kind="int"), TypeSpec(kind="float"), TypeSpec(kind="str")
JSON = TypeSpec(kind="json")


def task(
    *,
    name: str = "wf.train",
    version: str = "1",
    cache_version: str = "v1",
    ignored: tuple[str, ...] = ("seed",),
    inputs: dict[str, TypeSpec] | None = None,
    outputs: dict[str, TypeSpec] | None = None,
) -> TaskSpec:
    declared = inputs or {"x": INT, "rate": FLOAT, "params": JSON, "seed": INT}
    return TaskSpec(
        name=name,
        version=version,
        interface=Interface(
            inputs={n: InputSpec(type=t) for n, t in declared.items()},
            outputs=outputs if outputs is not None else {"model": STR, "score": FLOAT},
        ),
        metadata=TaskMetadata(
            cache=CacheSpec(enabled=True, version=cache_version, ignored_inputs=ignored)
        ),
    )


INPUTS: dict[str, Any] = {"x": 1, "rate": 0.5, "params": {"a": [1, {"b": 2, "c": 3}]}, "seed": 7}
BASE = cache_key("p", "d", task(), INPUTS)


def test_key_is_a_stable_hex_digest() -> None:
    assert len(BASE) == 64
    assert int(BASE, 16) >= 0
    assert cache_key("p", "d", task(), dict(INPUTS)) == BASE


def test_ignored_inputs_do_not_count() -> None:
    assert cache_key("p", "d", task(), {**INPUTS, "seed": 8}) == BASE
    assert cache_key("p", "d", task(), {k: v for k, v in INPUTS.items() if k != "seed"}) == BASE


def test_order_of_inputs_and_nested_keys_does_not_count() -> None:
    reordered = {"seed": 7, "params": {"a": [1, {"c": 3, "b": 2}]}, "rate": 0.5, "x": 1}
    assert cache_key("p", "d", task(), reordered) == BASE


def test_inputs_are_normalised_by_their_type() -> None:
    assert cache_key("p", "d", task(), {**INPUTS, "rate": 0.5}) == BASE
    whole = cache_key("p", "d", task(), {**INPUTS, "rate": 2})
    assert cache_key("p", "d", task(), {**INPUTS, "rate": 2.0}) == whole


def test_task_version_does_not_count() -> None:
    assert cache_key("p", "d", task(version="2"), INPUTS) == BASE


@pytest.mark.parametrize(
    ("project", "domain", "spec", "inputs"),
    [
        ("p2", "d", task(), INPUTS),
        ("p", "d2", task(), INPUTS),
        ("p", "d", task(name="wf.other"), INPUTS),
        ("p", "d", task(cache_version="v2"), INPUTS),
        ("p", "d", task(), {**INPUTS, "x": 2}),
        ("p", "d", task(), {**INPUTS, "params": {"a": [1, {"b": 2, "c": 4}]}}),
        ("p", "d", task(), {k: v for k, v in INPUTS.items() if k != "params"}),
        ("p", "d", task(ignored=()), INPUTS),
        ("p", "d", task(outputs={"model": STR, "score": INT}), INPUTS),
        ("p", "d", task(outputs={"model": STR}), INPUTS),
        ("p", "d", task(inputs={"x": FLOAT, "rate": FLOAT, "params": JSON, "seed": INT}), INPUTS),
    ],
    ids=[
        "project",
        "domain",
        "task-name",
        "cache-version",
        "input-value",
        "nested-value",
        "input-missing",
        "not-ignored",
        "output-type",
        "output-removed",
        "input-type",
    ],
)
def test_what_changes_the_key(project: str, domain: str, spec: TaskSpec, inputs: Any) -> None:
    assert cache_key(project, domain, spec, inputs) != BASE


@pytest.mark.parametrize(
    "inputs", [{**INPUTS, "x": "one"}, {**INPUTS, "params": {1, 2}}, {**INPUTS, "rate": math.nan}]
)
def test_bad_inputs_raise_input_error(inputs: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        cache_key("p", "d", task(), inputs)


def test_outputs_are_checked_and_normalised() -> None:
    assert checked_outputs(task(), {"model": "m", "score": 1}) == {"model": "m", "score": 1.0}


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({"model": "m"}, "missing: \\['score'\\]"),
        ({"model": "m", "score": 1.0, "extra": 1}, "not declared: \\['extra'\\]"),
        ({"model": 3, "score": 1.0}, "output 'model'"),
        (["m", 1.0], "mapping"),
    ],
)
def test_outputs_not_matching_the_interface(outputs: Any, message: str) -> None:
    with pytest.raises(OutputsError, match=message):
        checked_outputs(task(), outputs)


@pytest.mark.parametrize("value", [{1, 2}, math.inf, object()])
def test_json_typed_outputs_must_be_json(value: Any) -> None:
    with pytest.raises(OutputsError, match=r"output 'blob': expected .*JSON"):
        checked_outputs(task(outputs={"blob": JSON}), {"blob": value})


def test_entry_from_outputs() -> None:
    source = CacheSource("x1", "n2")
    entry = CacheEntry.from_outputs(task(), {"model": "m", "score": 2}, source=source)
    assert entry == CacheEntry({"model": "m", "score": 2.0}, "wf.train", "v1", source)
