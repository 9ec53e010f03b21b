"""Translation of flytekit definitions (serialized in process by the real flytekit) to sluice
specs: types, metadata, bindings, launch plans, and clear refusals naming what is unsupported."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sluice.errors import DefinitionError
from sluice.runtime import resolve_target
from sluice.spec.compound import build_task, launch_plan_call, map_options
from sluice.spec.models import ConcurrencyBehavior
from support.flyte import FLOWS_ROOT


def _flows(name: str, package: str = "flyteflows") -> ModuleType:
    if str(FLOWS_ROOT) not in sys.path:
        sys.path.insert(0, str(FLOWS_ROOT))
    return importlib.import_module(f"{package}.{name}")


def test_types_and_metadata_map_one_to_one() -> None:
    workflow, plan = resolve_target(_flows("shapes").typed)
    assert plan is None
    task = next(iter(workflow.tasks.values()))
    kinds = {name: str(spec.type) for name, spec in task.interface.inputs.items()}
    assert kinds == {
        "n": "int",
        "ratio": "float",
        "note": "str",
        "flag": "bool",
        "at": "datetime",
        "span": "float",
        "maybe": "int | None",
        "names": "list[str]",
        "counts": "dict[str, list[int]]",
        "color": "enum",
        "doc": "file",
        "folder": "directory",
    }
    assert task.interface.inputs["color"].type.values == ("red", "blue")
    meta = task.metadata
    assert (meta.retries, meta.timeout, meta.interruptible) == (3, 90.0, True)
    assert meta.cache.enabled and meta.cache.serialize
    assert (meta.cache.version, meta.cache.ignored_inputs) == ("7", ("note",))
    assert task.type == "python-task"
    assert task.custom["source_root"] == str(FLOWS_ROOT)


def test_an_unsupported_type_is_refused_naming_the_variable() -> None:
    with pytest.raises(DefinitionError, match=r"takes_a_union'.*input 'value'.*Optional"):
        resolve_target(_flows("shapes", "unsupported").takes_a_union)


def test_a_dataclass_input_is_json() -> None:
    workflow, _ = resolve_target(_flows("shapes", "unsupported").takes_a_dataclass)
    task = next(iter(workflow.tasks.values()))
    assert str(task.interface.inputs["point"].type) == "json"


def test_a_gate_node_becomes_a_gate_task() -> None:
    workflow, _ = resolve_target(_flows("shapes", "unsupported").gated)
    task = workflow.tasks[workflow.node("n0").task]
    assert (task.type, task.custom["kind"], task.custom["duration"]) == ("gate", "sleep", 1.0)


def test_a_condition_on_none_is_refused_naming_the_node_and_case() -> None:
    with pytest.raises(DefinitionError, match=r"node 'n0' case 0: condition operand .*noneType"):
        resolve_target(_flows("shapes", "unsupported").on_none)


def test_a_branch_node_becomes_a_dynamic_node_that_picks_its_case() -> None:
    workflow, _ = resolve_target(_flows("branches").signs)
    node = workflow.node("n1")
    task = workflow.tasks[node.task]
    assert (task.name, task.type) == ("branch.sign", "dynamic")
    assert task.source is not None and (task.source.module, task.source.qualname) == (
        "sluice.flyte.branches",
        "CHOOSE",
    )
    assert build_task(task).type == "python"
    assert str(task.interface.outputs["o0"]) == "int"
    # operands: a (n0.o0) and y; outside values the cases read: a and y again
    assert {n: (b.kind, b.node or b.name) for n, b in node.inputs.items() if n != "cases"} == {
        "op0": ("input", "y"),
        "op1": ("output", "n0"),
        "ext0": ("output", "n0"),
        "ext1": ("input", "y"),
    }
    cases = node.inputs["cases"].value
    assert [("condition" in c, "workflow" in c) for c in cases] == [
        (True, True),
        (True, True),
        (False, True),
    ]
    assert cases[0]["condition"]["conjunction"]["leftExpression"]["comparison"] == {
        "operator": "GT",
        "leftValue": {"var": "op1"},
        "rightValue": {"primitive": {"integer": "2"}},
    }


def test_a_dynamic_task_becomes_a_dynamic_node_built_on_the_flyte_plugin() -> None:
    workflow, _ = resolve_target(_flows("maps").dynamic_fan)
    task = workflow.tasks[workflow.node("n1").task]
    assert (task.name, task.type) == ("flyteflows.maps.fan_out", "dynamic")
    assert task.custom["dynamic_builder"] == "sluice.flyte.dynamic:built_workflow"
    build = build_task(task)
    assert (build.type, list(build.interface.outputs)) == ("python-task", ["workflow"])
    assert sorted(build.interface.inputs) == ["factor", "n"]


def test_an_eager_task_is_a_python_task_not_a_dynamic_one() -> None:
    workflow, _ = resolve_target(_flows("shapes", "unsupported").eagerly)
    assert [t.type for t in workflow.tasks.values()] == ["python-task"]


def test_a_map_task_becomes_a_map_node_of_the_mapped_task() -> None:
    workflow, _ = resolve_target(_flows("maps").mapped)
    (node,) = workflow.nodes
    task = workflow.tasks[node.task]
    assert task.type == "map"
    options = map_options(task)
    assert (options.item_input, options.zipped, options.concurrency) == ("x", (), 2)
    assert (options.min_success_ratio, options.min_successes) == (1.0, None)
    assert node.inputs["factor"].model_dump(include={"kind", "value"}) == {
        "kind": "constant",
        "value": 10,
    }
    assert (node.inputs["x"].kind, node.inputs["x"].name) == ("input", "xs")
    item = options.task
    assert (item.name, item.type) == ("flyteflows.maps.scale", "python-task")
    assert {n: str(i.type) for n, i in item.interface.inputs.items()} == {
        "x": "int",
        "factor": "int",
    }
    assert item.metadata.cache.enabled and item.metadata.cache.version == "1"
    args = item.custom["template"]["container"]["args"]
    assert args[0] == "pyflyte-execute" and args[-4:] == [
        "task-module",
        "flyteflows.maps",
        "task-name",
        "scale",
    ]
    tolerant, _ = resolve_target(_flows("maps").tolerant)
    tolerant_task = next(iter(tolerant.tasks.values()))
    assert map_options(tolerant_task).min_success_ratio == 0.6
    assert str(tolerant_task.interface.outputs["o0"]) == "list[int | None]"


def test_a_sub_workflow_is_inlined_and_a_launch_plan_call_is_a_launch_plan_node() -> None:
    workflow, _ = resolve_target(_flows("maps").outer)
    assert [n.id for n in workflow.nodes] == ["n0-n0", "n0-n1", "n1"]
    first, second, call = workflow.nodes
    assert (first.inputs["x"].kind, first.inputs["x"].name) == ("input", "x")
    assert (second.inputs["x"].node, second.upstream) == ("n0-n0", ("n0-n0",))
    # waiting for the sub-workflow node is waiting for every node it inlined
    assert (call.inputs["x"].node, call.upstream) == ("n0-n1", ("n0-n0", "n0-n1"))
    launched = launch_plan_call(workflow.tasks[call.task])
    assert launched.launch_plan.name == "inner_plan"
    assert launched.launch_plan.fixed_inputs == {"y": 7}
    assert "y" not in workflow.tasks[call.task].interface.inputs


def test_constants_defaults_and_promises_become_bindings() -> None:
    shapes = _flows("shapes")
    constants, _ = resolve_target(shapes.constants)
    assert constants.nodes[0].inputs["x"].model_dump(include={"kind", "value"}) == {
        "kind": "constant",
        "value": 41,
    }
    summing, _ = resolve_target(shapes.summing)
    assert summing.interface.inputs["b"].default == 2
    assert not summing.interface.inputs["a"].has_default
    second = summing.node("n1")
    assert (second.inputs["x"].kind, second.inputs["x"].node, second.upstream) == (
        "output",
        "n0",
        ("n0",),
    )


def test_a_launch_plan_keeps_its_inputs_schedule_and_policy() -> None:
    shapes, chain = _flows("shapes"), _flows("chain")
    _, fixed = resolve_target(shapes.fixed)
    assert fixed is not None
    assert (fixed.fixed_inputs, fixed.default_inputs) == ({"a": 5}, {"b": 3})
    _, nightly = resolve_target(shapes.nightly)
    assert nightly is not None and nightly.schedule is not None
    assert nightly.schedule.cron == "0 3 * * *"
    _, every = resolve_target(chain.every_minute)
    assert every is not None and every.schedule is not None and every.concurrency is not None
    assert every.schedule.fixed_rate == 60.0
    assert (every.concurrency.max, every.concurrency.behavior) == (1, ConcurrencyBehavior.SKIP)


def test_a_map_task_run_alone_is_refused_naming_it() -> None:
    from flytekit import map_task

    with pytest.raises(DefinitionError, match=r"is a flytekit map_task: .* inside a @workflow"):
        resolve_target(map_task(_flows("maps").picky))


def test_nested_sub_workflows_are_inlined_under_each_calling_node() -> None:
    workflow, _ = resolve_target(_flows("maps").nested)
    assert [n.id for n in workflow.nodes] == ["n0-n0", "n0-n1-n0", "n0-n1-n1"]
    assert workflow.node("n0-n1-n0").inputs["x"].node == "n0-n0"
    assert workflow.outputs["o0"].node == "n0-n1-n1"


def test_a_map_over_a_launch_plan_is_refused_naming_the_node() -> None:
    with pytest.raises(DefinitionError, match="node 'n0' is an array node over a non-task node"):
        resolve_target(_flows("shapes", "unsupported").map_over_plan)


def test_a_dynamic_task_reaching_a_worker_fails_naming_its_dynamic_job_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a @dynamic template run without its builder (a package whose dynamic task lacks the
    # mark, so it was translated as a plain task) fails clearly, not as "no outputs.pb"
    from google.protobuf import json_format

    from sluice.flyte.entities import serialize
    from sluice.plugins.builtin.flyte_exec import run_flyte_job

    fan = _flows("maps").fan_out
    entities = serialize(fan)
    template = entities.tasks[fan.name].template
    context = next(p.value for p in template.container.env if p.key == "_F_SS_C")
    monkeypatch.setenv("_F_SS_C", context)  # what Flyte's pod would have: flytekit compiles
    job = {
        "id": "dynamic-1",
        "template": json_format.MessageToDict(template),
        "inputs": {"n": 2, "factor": 3},
        "work_dir": str(tmp_path),
        "source_root": entities.root_of(fan.name),
    }
    error = run_flyte_job(job)["error"]
    assert error["type"] == "DynamicTaskError"
    assert "futures.pb (a DynamicJobSpec)" in error["message"]
