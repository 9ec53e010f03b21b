"""Spec models: user-facing constructors refuse bad values naming them; specs round-trip as
JSON."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.errors import InvalidArgumentError, InvalidPolicyError, InvalidQuotaError
from sluice.resources.models import ResourceConstraintsSpec
from sluice.spec.models import (
    Binding,
    CacheSpec,
    Claims,
    ConcurrencyBehavior,
    ConcurrencyPolicy,
    InputSpec,
    Interface,
    LaunchPlanSpec,
    LockSpec,
    NodeSpec,
    Quota,
    Schedule,
    SourceRef,
    TaskMetadata,
    TaskSpec,
    WorkflowSpec,
)
from sluice.spec.types import TypeSpec

# --- Quota -------------------------------------------------------------------------------------


def test_quota_defaults_to_one_unit() -> None:
    assert Quota("hive") == Quota("hive", 1)


@pytest.mark.parametrize(
    ("namespace", "units", "shown"),
    [
        ("hive", 0, "0"),
        ("hive", -2, "-2"),
        ("hive", 1.5, "1.5"),
        ("hive", True, "True"),
        ("hive", "2", "'2'"),
        ("", 1, "''"),
        (None, 1, "None"),
    ],
)
def test_quota_refuses_bad_values_naming_them(namespace: Any, units: Any, shown: str) -> None:
    with pytest.raises(InvalidQuotaError) as caught:
        Quota(namespace, units)
    assert shown in str(caught.value)
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, ValueError)


# --- ConcurrencyPolicy -------------------------------------------------------------------------


def test_concurrency_policy_defaults_and_behaviour_from_string() -> None:
    policy = ConcurrencyPolicy(2)
    assert (policy.max, policy.behavior, policy.max_pending) == (2, ConcurrencyBehavior.WAIT, None)
    skip = ConcurrencyPolicy(1, "SKIP")  # type: ignore[arg-type]
    assert skip.behavior is ConcurrencyBehavior.SKIP
    assert ConcurrencyPolicy(1, ConcurrencyBehavior.REPLACE, max_pending=0).max_pending == 0


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"max": 0}, "max must be an int from 1 to 1_000_000_000, got 0"),
        ({"max": -1}, "got -1"),
        ({"max": True}, "got True"),
        ({"max": 2.0}, "got 2.0"),
        ({"max": 1, "behavior": "BOGUS"}, "got 'BOGUS'"),
        ({"max": 1, "behavior": "wait"}, "got 'wait'"),
        (
            {"max": 1, "max_pending": -1},
            "max_pending must be an int from 0 to 1_000_000_000, got -1",
        ),
        ({"max": 1, "max_pending": 1.5}, "got 1.5"),
    ],
)
def test_concurrency_policy_refuses_bad_values_naming_them(
    kwargs: dict[str, Any], shown: str
) -> None:
    with pytest.raises(InvalidPolicyError) as caught:
        ConcurrencyPolicy(**kwargs)
    assert shown in str(caught.value)


def test_concurrency_policy_behavior_error_lists_the_choices() -> None:
    with pytest.raises(InvalidPolicyError) as caught:
        ConcurrencyPolicy(1, "BOGUS")  # type: ignore[arg-type]
    for name in ("WAIT", "SKIP", "REPLACE"):
        assert name in str(caught.value)


# --- Schedule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cron": "0 * * * *"},
        {"cron": "*/5 9-17 * * 1-5", "timezone": "Europe/Paris"},
        {"cron": "@daily", "timezone": "America/New_York"},
        {"fixed_rate": 30},
        {"fixed_rate": 0.5, "catch_up": "all", "catch_up_max": 3},
        {"cron": "0 0 * * *", "catch_up": "none"},
    ],
)
def test_schedule_accepts_valid_definitions(kwargs: dict[str, Any]) -> None:
    schedule = Schedule(**kwargs)
    for key, value in kwargs.items():
        assert getattr(schedule, key) == value


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({}, "exactly one of cron or fixed_rate"),
        ({"cron": "* * * * *", "fixed_rate": 5}, "exactly one of cron or fixed_rate"),
        ({"cron": "not a cron"}, "'not a cron'"),
        ({"cron": "61 * * * *"}, "'61 * * * *'"),
        ({"cron": ""}, "''"),
        ({"cron": "0 * * * *", "timezone": "Mars/Olympus_Mons"}, "'Mars/Olympus_Mons'"),
        ({"fixed_rate": 5, "timezone": ""}, "timezone ''"),
        ({"fixed_rate": 5, "timezone": "../../etc/passwd"}, "'../../etc/passwd'"),
        ({"fixed_rate": 0}, "got 0"),
        ({"fixed_rate": -3.5}, "got -3.5"),
        ({"fixed_rate": True}, "got True"),
        ({"fixed_rate": 5, "catch_up": "some"}, "got 'some'"),
        ({"fixed_rate": 5, "catch_up_max": 0}, "got 0"),
    ],
)
def test_schedule_refuses_bad_values_naming_them(kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(InvalidPolicyError) as caught:
        Schedule(**kwargs)
    assert shown in str(caught.value)


def test_schedule_error_messages_name_what_is_wrong() -> None:
    with pytest.raises(InvalidPolicyError, match="cron"):
        Schedule(cron="every day")
    with pytest.raises(InvalidPolicyError, match="time zone"):
        Schedule(cron="0 0 * * *", timezone="Nowhere/Special")


# --- ResourceConstraintsSpec ----------------------------------------------------------------------


def test_resource_constraints_accept_none_and_positive_ints() -> None:
    assert ResourceConstraintsSpec() == ResourceConstraintsSpec(None, None)
    spec = ResourceConstraintsSpec(project_scope=3, namespace_scope=1)
    assert (spec.project_scope, spec.namespace_scope) == (3, 1)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"project_scope": 0}, "project_scope must be an int >= 1 or None, got 0"),
        ({"namespace_scope": -1}, "namespace_scope must be an int >= 1 or None, got -1"),
        ({"project_scope": True}, "got True"),
        ({"namespace_scope": 2.5}, "got 2.5"),
    ],
)
def test_resource_constraints_refuse_bad_values_naming_them(
    kwargs: dict[str, Any], shown: str
) -> None:
    with pytest.raises(InvalidQuotaError) as caught:
        ResourceConstraintsSpec(**kwargs)
    assert shown in str(caught.value)


# --- pydantic spec models ---------------------------------------------------------------------

INT = TypeSpec(kind="int")


def make_task_spec() -> TaskSpec:
    return TaskSpec(
        name="pkg.add",
        version="v1",
        interface=Interface(
            inputs={
                "a": InputSpec(type=INT),
                "b": InputSpec(type=INT, default=2, has_default=True),
            },
            outputs={"o0": INT},
        ),
        metadata=TaskMetadata(
            retries=2,
            timeout=30.0,
            interruptible=True,
            cache=CacheSpec(enabled=True, version="1", serialize=True, ignored_inputs=("b",)),
            priority=5,
        ),
        claims=Claims(
            quotas=(Quota("hive", 2), Quota("api")),
            locks=(LockSpec(template="db/{a}"), LockSpec(function="pkg:locks")),
        ),
        custom={"image": "python:3.11", "env": {"A": "1"}},
        source=SourceRef(module="pkg", qualname="add", file="/src/pkg.py"),
    )


def make_workflow_spec() -> WorkflowSpec:
    task = make_task_spec()
    return WorkflowSpec(
        name="pkg.wf",
        version="w1",
        interface=Interface(inputs={"x": InputSpec(type=INT)}, outputs={"o0": INT}),
        nodes=(
            NodeSpec(id="add", task=task.key, inputs={"a": Binding(kind="input", name="x")}),
            NodeSpec(
                id="add-2",
                task=task.key,
                inputs={
                    "a": Binding(kind="output", node="add", output="o0"),
                    "b": Binding(kind="constant", value=7),
                },
                upstream=("add",),
            ),
        ),
        outputs={"o0": Binding(kind="output", node="add-2", output="o0")},
        tasks={task.key: task},
    )


def make_launch_plan_spec() -> LaunchPlanSpec:
    return LaunchPlanSpec(
        name="nightly",
        version="lp1",
        workflow="pkg.wf@w1",
        default_inputs={"x": 1},
        fixed_inputs={"y": [1, 2]},
        schedule=Schedule(cron="0 3 * * *", timezone="Europe/Paris", catch_up="all"),
        concurrency=ConcurrencyPolicy(2, ConcurrencyBehavior.REPLACE, max_pending=4),
        priority=3,
        overwrite_cache=True,
    )


@pytest.mark.parametrize(
    "factory", [make_task_spec, make_workflow_spec, make_launch_plan_spec], ids=lambda f: f.__name__
)
def test_specs_round_trip_through_json(factory: Any) -> None:
    original = factory()
    text = original.model_dump_json()
    restored = type(original).model_validate_json(text)
    assert restored == original
    assert restored.model_dump_json() == text
    assert type(original).model_validate(original.model_dump(mode="json")) == original


def test_launch_plan_spec_round_trip_keeps_policy_types() -> None:
    restored = LaunchPlanSpec.model_validate_json(make_launch_plan_spec().model_dump_json())
    assert isinstance(restored.schedule, Schedule)
    assert isinstance(restored.concurrency, ConcurrencyPolicy)
    assert restored.concurrency.behavior is ConcurrencyBehavior.REPLACE


def test_task_spec_round_trip_keeps_quota_values() -> None:
    restored = TaskSpec.model_validate_json(make_task_spec().model_dump_json())
    assert restored.claims.quotas == (Quota("hive", 2), Quota("api", 1))
    assert restored.key == "pkg.add@v1"


def test_stored_launch_plan_with_a_bad_policy_is_refused() -> None:
    text = make_launch_plan_spec().model_dump_json().replace('"max":2', '"max":0')
    with pytest.raises(ValueError, match="got 0"):
        LaunchPlanSpec.model_validate_json(text)


def test_specs_are_frozen_and_refuse_unknown_fields() -> None:
    spec = make_task_spec()
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]
    data = spec.model_dump(mode="json")
    data["colour"] = "blue"
    with pytest.raises(ValueError, match="colour"):
        TaskSpec.model_validate(data)


def test_task_metadata_refuses_negative_retries_and_zero_timeout() -> None:
    with pytest.raises(ValueError, match="retries"):
        TaskMetadata(retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        TaskMetadata(timeout=0)


def test_workflow_spec_node_lookup() -> None:
    spec = make_workflow_spec()
    assert spec.node("add-2").upstream == ("add",)
    with pytest.raises(KeyError):
        spec.node("missing")


def test_binding_upstream_nodes_include_nested_items() -> None:
    binding = Binding(
        kind="list",
        items=(
            Binding(kind="output", node="a", output="o0"),
            Binding(kind="constant", value=1),
            Binding(kind="list", items=(Binding(kind="output", node="b", output="o0"),)),
        ),
    )
    assert binding.upstream_nodes() == {"a", "b"}
    assert Binding(kind="input", name="x").upstream_nodes() == set()
