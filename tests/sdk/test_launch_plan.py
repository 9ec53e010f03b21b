"""LaunchPlan: inputs checked against the workflow, errors naming the input, stable versions."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import foundation_flows as flows

from sluice import ConcurrencyBehavior, ConcurrencyPolicy, LaunchPlan, Schedule, workflow
from sluice.errors import DefinitionError, InputError
from sluice.sdk.launch_plan import check_launch_inputs
from sluice.spec.models import LaunchPlanSpec


@workflow
def measured(count: int, ratio: float = 0.5, label: str = "x") -> str:
    return flows.fmt(value=flows.add(a=count))


def make(**kwargs: Any) -> LaunchPlan:
    options: dict[str, Any] = {
        "default_inputs": {"count": 1},
        "fixed_inputs": {"ratio": 2},
        "schedule": Schedule(cron="0 3 * * *", timezone="Europe/Paris"),
        "concurrency": ConcurrencyPolicy(1, ConcurrencyBehavior.SKIP),
        "priority": 2,
    }
    options.update(kwargs)
    return LaunchPlan("nightly", measured, **options)  # type: ignore[arg-type]


def test_spec_records_the_workflow_inputs_and_policies() -> None:
    spec = make().spec
    wf = measured.spec
    assert spec.name == "nightly"
    assert spec.workflow == f"{wf.name}@{wf.version}"
    assert spec.default_inputs == {"count": 1}
    assert spec.fixed_inputs == {"ratio": 2.0}
    assert isinstance(spec.fixed_inputs["ratio"], float)  # normalised to the input's type
    assert spec.schedule == Schedule(cron="0 3 * * *", timezone="Europe/Paris")
    assert spec.concurrency == ConcurrencyPolicy(1, ConcurrencyBehavior.SKIP)
    assert spec.priority == 2
    assert spec.overwrite_cache is False
    assert len(spec.version) == 16


def test_launch_plan_without_options() -> None:
    spec = LaunchPlan("adhoc", measured).spec
    assert (spec.default_inputs, spec.fixed_inputs) == ({}, {})
    assert spec.schedule is None and spec.concurrency is None


def test_version_is_stable() -> None:
    assert make().spec.version == make().spec.version
    plan = make()
    assert plan.spec is plan.spec


@pytest.mark.parametrize(
    "change",
    [
        {"default_inputs": {"count": 2}},
        {"fixed_inputs": {"ratio": 3}},
        {"schedule": Schedule(cron="0 4 * * *", timezone="Europe/Paris")},
        {"concurrency": ConcurrencyPolicy(2, ConcurrencyBehavior.SKIP)},
        {"concurrency": None},
        {"priority": 3},
        {"overwrite_cache": True},
    ],
)
def test_version_changes_with_the_definition(change: dict[str, Any]) -> None:
    assert make(**change).spec.version != make().spec.version


def test_version_changes_with_the_workflow() -> None:
    @workflow(name=measured.name)
    def measured_again(count: int, ratio: float = 0.5, label: str = "y") -> str:
        return flows.fmt(value=flows.add(a=count))

    other = LaunchPlan("nightly", measured_again, default_inputs={"count": 1})  # type: ignore[arg-type]
    same = LaunchPlan("nightly", measured, default_inputs={"count": 1})
    assert other.spec.workflow != same.spec.workflow
    assert other.spec.version != same.spec.version


def test_unknown_input_is_an_error_listing_the_inputs() -> None:
    with pytest.raises(InputError) as caught:
        _ = make(default_inputs={"cuont": 1}).spec
    message = str(caught.value)
    assert "launch plan 'nightly'" in message
    assert "'cuont'" in message
    assert "['count', 'label', 'ratio']" in message


def test_unknown_fixed_input_is_an_error() -> None:
    with pytest.raises(InputError, match="'nope'"):
        _ = make(fixed_inputs={"nope": 1}).spec


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"default_inputs": {"count": "one"}}, "count"),
        ({"default_inputs": {"count": 1.5}}, "count"),
        ({"fixed_inputs": {"ratio": "half"}}, "ratio"),
        ({"fixed_inputs": {"label": None}}, "label"),
    ],
)
def test_input_of_the_wrong_type_is_an_error_naming_it(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(InputError) as caught:
        _ = make(**kwargs).spec
    assert f"input {name!r}" in str(caught.value)
    assert "launch plan 'nightly'" in str(caught.value)


def test_an_input_both_default_and_fixed_is_an_error() -> None:
    with pytest.raises(DefinitionError) as caught:
        _ = make(default_inputs={"count": 1, "ratio": 1.0}).spec
    assert "'ratio'" in str(caught.value)
    assert "both default and fixed" in str(caught.value)


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        (("", measured), {}, "LaunchPlan name must be 1 to 200"),
        ((None, measured), {}, "LaunchPlan name must be a string"),
        (("lp", flows.add), {}, "must be a @workflow"),
        (("lp", measured), {"concurrency": 3}, "ConcurrencyPolicy"),
        (("lp", measured), {"schedule": "0 * * * *"}, "Schedule"),
    ],
)
def test_bad_arguments_are_definition_errors(
    args: tuple[Any, ...], kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(DefinitionError, match=fragment):
        LaunchPlan(*args, **kwargs)


def test_spec_round_trips_through_json() -> None:
    spec = make().spec
    assert LaunchPlanSpec.model_validate_json(spec.model_dump_json()) == spec


def test_check_launch_inputs_normalises_and_names_the_bad_input() -> None:
    wf = measured.spec
    assert check_launch_inputs(wf, {"ratio": 1}, "run") == {"ratio": 1.0}
    with pytest.raises(InputError, match=r"run: input 'count': expected int"):
        check_launch_inputs(wf, {"count": "x"}, "run")
