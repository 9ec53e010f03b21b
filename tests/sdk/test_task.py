"""@task: specs built from functions, definition errors, local calls and the worker's JSON
round trip."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from tests.support import foundation_flows as flows

from sluice import Cache, Locks, Quota, TaskDef, task
from sluice.errors import DefinitionError, InputError, InvalidArgumentError, OutputsError
from sluice.spec.models import LockSpec
from sluice.spec.types import TypeSpec

MODULE = flows.__name__
INT = TypeSpec(kind="int")


class MinMax(NamedTuple):
    low: int
    high: int


@dataclasses.dataclass
class Box:
    width: float
    label: str = "box"


DAY, BOX = dt.date(2024, 1, 2), Box(1.0)


def lock_names(inputs: dict[str, Any]) -> list[str]:
    return [f"db/{inputs['a']}"]


# --- specs ----------------------------------------------------------------------------------


def test_sync_task_spec() -> None:
    spec = flows.add.spec
    assert isinstance(flows.add, TaskDef)
    assert flows.add.name == spec.name == f"{MODULE}.add"
    assert spec.type == "python"
    assert spec.key == f"{spec.name}@{spec.version}"
    assert len(spec.version) == 16
    assert spec.interface.inputs["a"].type == INT
    assert not spec.interface.inputs["a"].has_default
    assert spec.interface.inputs["b"].has_default
    assert spec.interface.inputs["b"].default == 2
    assert spec.interface.outputs == {"o0": INT}
    assert spec.source is not None
    assert (spec.source.module, spec.source.qualname) == (MODULE, "add")
    assert spec.source.file == str(Path(flows.__file__).resolve())
    assert not flows.add.is_async


def test_async_task_spec_records_metadata_and_claims() -> None:
    spec = flows.async_add.spec
    assert flows.async_add.is_async
    assert spec.metadata.retries == 3
    assert spec.metadata.timeout == 12.5
    assert spec.metadata.interruptible is True
    assert spec.metadata.priority == 4
    cache = spec.metadata.cache
    assert (cache.enabled, cache.version, cache.serialize) == (True, "1", True)
    assert cache.ignored_inputs == ("b",)
    assert spec.claims.quotas == (Quota("hive", 2),)
    assert spec.claims.locks == (LockSpec(template="db/{a}"),)
    assert spec.custom == {"image": "python:3.11"}


def test_task_without_cache_has_cache_disabled() -> None:
    cache = flows.add.spec.metadata.cache
    assert (cache.enabled, cache.version) == (False, "")


def test_task_options_name_and_type() -> None:
    def double(a: int) -> int:
        return 2 * a

    spec = task(name="custom.double", type="shell", custom={"command": "echo {a}"})(double).spec
    assert spec.name == "custom.double"
    assert spec.type == "shell"
    assert spec.custom == {"command": "echo {a}"}


def test_a_plugin_config_model_is_stored_as_its_json() -> None:
    from sluice.plugins.ray import RayJobConfig, WorkerGroup

    def double(a: int) -> int:
        return 2 * a

    config = RayJobConfig(head_cpus=4, worker_groups=(WorkerGroup(replicas=2),))
    spec = task(name="custom.ray", type="ray", custom=config)(double).spec
    assert spec.custom == {"head_cpus": 4, "worker_groups": [{"replicas": 2}]}
    assert RayJobConfig.model_validate(spec.custom) == config


def test_tuple_outputs_are_numbered() -> None:
    assert list(flows.split.spec.interface.outputs) == ["o0", "o1"]
    assert [str(t) for t in flows.split.spec.interface.outputs.values()] == ["int", "str"]


def test_named_tuple_outputs_take_the_field_names() -> None:
    outputs = flows.stats.spec.interface.outputs
    assert list(outputs) == ["total", "mean"]
    assert [t.kind for t in outputs.values()] == ["int", "float"]


def test_none_return_has_no_outputs() -> None:
    assert flows.noop.spec.interface.outputs == {}


def test_defaults_are_stored_as_json() -> None:
    def when(day: dt.date = DAY, box: Box = BOX, n: float = 1) -> None:
        return None

    inputs = task(when).spec.interface.inputs
    assert inputs["day"].default == "2024-01-02"
    assert inputs["box"].default == {"width": 1.0, "label": "box"}
    assert inputs["n"].default == 1.0 and isinstance(inputs["n"].default, float)


def test_several_lock_forms() -> None:
    def job(a: int, parts: list[str]) -> None:
        return None

    spec = task(locks=["x/{a}", Locks("p/{item}", for_each="parts"), lock_names])(job).spec
    assert spec.claims.locks == (
        LockSpec(template="x/{a}"),
        LockSpec(template="p/{item}", for_each="parts"),
        LockSpec(function=f"{__name__}:lock_names"),
    )


def test_version_is_stable_for_the_same_definition() -> None:
    def work(a: int) -> int:
        return a

    assert task(work).spec.version == task(work).spec.version
    assert task(retries=1)(work).spec.version == task(retries=1)(work).spec.version


def test_version_changes_with_options_and_code() -> None:
    def work(a: int) -> int:
        return a

    def other(a: int) -> int:
        return a + 1

    base = task(name="w")(work).spec.version
    assert task(name="w", retries=1)(work).spec.version != base
    assert task(name="w", cache=Cache(version="1"))(work).spec.version != base
    assert (
        task(name="w", cache=Cache(version="2"))(work).spec.version
        != task(name="w", cache=Cache(version="1"))(work).spec.version
    )
    assert task(name="w")(other).spec.version != base


# --- definition errors -------------------------------------------------------------------------


def unannotated(a) -> int:  # type: ignore[no-untyped-def]
    return 1


def no_return(a: int):  # type: ignore[no-untyped-def]
    return a


def set_param(a: set[int]) -> int:
    return 1


def set_return(a: int) -> set[int]:
    return {a}


def any_param(a: Any) -> int:
    return 1


def star_args(*a: int) -> int:
    return 1


def open_tuple(a: int) -> tuple[int, ...]:
    return (a,)


def bad_default(a: int = "x") -> int:  # type: ignore[assignment]
    return a


def plain(a: int, parts: list[str]) -> int:
    return a


@pytest.mark.parametrize(
    ("build", "fragments"),
    [
        (lambda: task(unannotated), ["unannotated", "'a'", "annotation"]),
        (lambda: task(no_return), ["no_return", "return"]),
        (lambda: task(set_param), ["set_param", "parameter 'a'", "set"]),
        (lambda: task(set_return), ["set_return", "output 'o0'", "set"]),
        (lambda: task(any_param), ["any_param", "parameter 'a'"]),
        (lambda: task(star_args), ["star_args", "'a'"]),
        (lambda: task(open_tuple), ["open_tuple", "tuple"]),
        (lambda: task(bad_default), ["bad_default", "parameter 'a'", "'x'"]),
        (lambda: task(cache=True)(plain), ["plain", "version"]),
        (lambda: task(cache=Cache(version=""))(plain), ["plain", "version"]),
        (
            lambda: task(cache=Cache(version="1", ignored_inputs=("zz",)))(plain),
            ["plain", "ignored input 'zz'"],
        ),
        (lambda: task(cache=Cache(version="1", max_age=-5))(plain), ["plain", "max_age"]),
        (lambda: task(retries=-1)(plain), ["plain", "retries", "-1"]),
        (lambda: task(retries=True)(plain), ["plain", "retries", "True"]),
        (lambda: task(timeout=0)(plain), ["plain", "timeout", "0"]),
        (lambda: task(quotas=["hive"])(plain), ["plain", "quotas", "'hive'"]),  # type: ignore[list-item]
        (lambda: task(locks=lambda inputs: ["x"])(plain), ["plain", "locks"]),
        (lambda: task(locks=[lambda inputs: ["x"]])(plain), ["plain", "locks"]),
        (lambda: task(locks=Locks("p/{x}", for_each="nope"))(plain), ["plain", "'nope'"]),
    ],
)
def test_bad_definitions_name_the_task_and_parameter(
    build: Callable[[], object], fragments: list[str]
) -> None:
    with pytest.raises(DefinitionError) as caught:
        build()
    message = str(caught.value)
    assert f"task '{__name__}." in message or "task 'plain'" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# --- local calls -----------------------------------------------------------------------------


def test_calling_a_task_outside_a_workflow_runs_it() -> None:
    assert flows.add(1) == 3
    assert flows.add(1, b=5) == 6
    assert flows.split(4) == (4, "4")
    assert flows.stats([1, 2, 3]) == flows.Stats(6, 2.0)
    assert flows.shift(flows.Point(1), 2) == flows.Point(3)


async def test_calling_an_async_task_outside_a_workflow_gives_its_coroutine() -> None:
    result = flows.async_add(1, 2)
    assert inspect.isawaitable(result)
    assert await result == 3


def test_task_keeps_the_function_metadata() -> None:
    assert flows.add.__name__ == "add"
    assert flows.add.__wrapped__ is flows.add.fn  # type: ignore[attr-defined]
    assert repr(flows.add) == f"<task {MODULE}.add>"


# --- execute_json (what a worker does) -----------------------------------------------------


def test_execute_json_round_trip_scalars_and_defaults() -> None:
    assert flows.add.execute_json({"a": 1}) == {"o0": 3}
    assert flows.add.execute_json({"a": 1, "b": 10}) == {"o0": 11}


def test_execute_json_runs_async_tasks() -> None:
    assert flows.async_add.execute_json({"a": 1}) == {"o0": 2}


def test_execute_json_dataclass_inputs_and_outputs() -> None:
    assert flows.shift.execute_json({"p": {"x": 1, "y": 2}, "by": 3}) == {"o0": {"x": 4, "y": 2.0}}


def test_execute_json_dates() -> None:
    outputs = flows.describe.execute_json({"day": "2024-02-29", "when": "2024-02-29T10:00:00Z"})
    assert outputs == {"o0": "2024-02-29 2024-02-29T10:00:00+00:00"}


def test_execute_json_tuple_named_tuple_and_none_outputs() -> None:
    assert flows.split.execute_json({"a": 7}) == {"o0": 7, "o1": "7"}
    assert flows.stats.execute_json({"xs": [1, 2, 3]}) == {"total": 6, "mean": 2.0}
    assert flows.noop.execute_json({"a": 1}) == {}


def test_execute_json_named_tuple_task_returning_a_named_tuple() -> None:
    def bounds(xs: list[int]) -> MinMax:
        return MinMax(min(xs), max(xs))

    assert task(bounds).execute_json({"xs": [3, 1, 2]}) == {"low": 1, "high": 3}


def test_execute_json_bad_input_is_an_input_error_naming_it() -> None:
    with pytest.raises(InputError) as caught:
        flows.shift.execute_json({"p": {"x": "one"}, "by": 1})
    assert "input 'p'" in str(caught.value)


def test_outputs_that_do_not_fit_are_outputs_errors() -> None:
    def wrong(a: int) -> int:
        return "zz"  # type: ignore[return-value]

    def short(a: int) -> tuple[int, int]:
        return a  # type: ignore[return-value]

    def opaque(a: int) -> dict:  # type: ignore[type-arg]
        return {"thing": object()}

    def boxed(a: int) -> Box:
        return {"no": "box"}  # type: ignore[return-value]

    with pytest.raises(OutputsError, match=r"wrong' output 'o0'.*'zz'"):
        task(wrong).execute_json({"a": 1})
    with pytest.raises(OutputsError, match="expected 2 outputs"):
        task(short).execute_json({"a": 1})
    with pytest.raises(OutputsError, match="opaque"):
        task(opaque).execute_json({"a": 1})
    with pytest.raises(OutputsError, match="boxed"):
        task(boxed).execute_json({"a": 1})


# --- definitions that could never run are refused when defined ---------------------------------


def _partitioned(table: str, parts: list[int], count: int) -> None:
    return None


def _nested_lock_function() -> Callable[[dict[str, Any]], list[str]]:
    def names(inputs: dict[str, Any]) -> list[str]:
        return ["x"]

    return names


@pytest.mark.parametrize(
    ("locks", "fragments"),
    [
        ("db/{nope}", ["'nope'", "not an input"]),
        ("", ["empty"]),
        (Locks(""), ["empty"]),
        ("db/{item}", ["'item'", "for_each"]),
        ("db/{}", ["positional"]),
        ("db/{0}", ["positional"]),
        ("db/{table", ["'db/{table'"]),
        (Locks("db/{item}", for_each="count"), ["'count'", "list"]),
        (Locks("db/{item}", for_each="table"), ["'table'", "list"]),
        (Locks("db/{nope}", for_each="parts"), ["'nope'"]),
        ("db/\x00{table}", ["control"]),
        ("x" * 300, ["255"]),
        (_nested_lock_function(), ["names", "module level"]),
    ],
)
def test_lock_definitions_that_can_never_be_filled_are_refused(
    locks: Any, fragments: list[str]
) -> None:
    with pytest.raises(DefinitionError) as caught:
        task(locks=locks)(_partitioned)
    message = str(caught.value)
    assert "_partitioned" in message and "locks" in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_lock_templates_naming_inputs_fields_and_items_are_accepted() -> None:
    spec = task(locks=["db/{table}/{count:03d}", Locks("p/{table}/{item}", for_each="parts")])(
        _partitioned
    ).spec
    assert [lock.template for lock in spec.claims.locks] == [
        "db/{table}/{count:03d}",
        "p/{table}/{item}",
    ]


@pytest.mark.parametrize("units", [0, -1, 1001, 10**30, 2.5, True, "3"])
def test_quota_units_out_of_range_are_refused(units: Any) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        Quota("hive", units=units)
    assert "'hive'" in str(caught.value) and repr(units) in str(caught.value)
