"""sluice.map and @sluice.dynamic as specs: one node each, list-typed map interfaces, the
item input, options checked with errors naming the bad value, a dynamic body built into a
workflow from real inputs, and the child naming the engine and the service share."""

from __future__ import annotations

import pytest

import sluice
from sluice.errors import DefinitionError
from sluice.spec import compound as c
from sluice.spec.models import WorkflowSpec
from sluice.spec.types import TypeSpec

INT = TypeSpec(kind="int")


@sluice.task
def add(x: int, y: int = 0) -> int:
    return x + y


@sluice.task
def pair(x: int, y: int) -> int:
    return x * y


@sluice.task
def numbers(n: int) -> list[int]:
    return list(range(n))


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


def test_map_is_one_node_with_list_typed_inputs_and_outputs() -> None:
    @sluice.workflow
    def wf(xs: list[int]) -> list[int]:
        return sluice.map(add, concurrency=4)(items=xs, fixed={"y": 2})  # type: ignore[no-any-return]

    spec = wf.spec
    (node,) = spec.nodes
    task = spec.tasks[node.task]
    assert task.type == "map" and node.id == "map_add"
    assert task.interface.inputs["x"].type == TypeSpec(kind="list", args=(INT,))
    assert task.interface.inputs["y"].type == INT
    assert task.interface.outputs == {"o0": TypeSpec(kind="list", args=(INT,))}
    options = c.map_options(task)
    assert (options.item_input, options.concurrency, options.min_success_ratio) == ("x", 4, 1.0)
    assert options.task == add.spec
    assert node.inputs["y"].value == 2 and node.inputs["x"].kind == "input"


def test_below_ratio_one_the_items_are_optional() -> None:
    @sluice.workflow
    def wf(xs: list[int]) -> int:
        return total(values=sluice.map(add, min_success_ratio=0.5)(items=xs))

    with pytest.raises(DefinitionError, match="expected list\\[int\\], got list\\[int \\| None\\]"):
        _ = wf.spec


def test_items_from_an_upstream_output_wait_for_it() -> None:
    @sluice.workflow
    def wf(n: int) -> int:
        return total(values=sluice.map(add)(items=numbers(n=n)))

    node = wf.spec.node("map_add")
    assert node.upstream == ("numbers",)


def test_the_item_input_must_be_exactly_one() -> None:
    with pytest.raises(DefinitionError, match=r"exactly one input .* got \['x', 'y'\]"):
        sluice.map(pair)(items=[1, 2])
    with pytest.raises(DefinitionError, match="fixed input 'z' is not an input"):
        sluice.map(pair)(items=[1], fixed={"z": 1})
    assert sluice.map(add)(items=[1, 2]) == [1, 2]  # y has a default: x takes the items
    assert sluice.map(pair)(items=[1, 2], fixed={"y": 3}) == [3, 6]  # outside a workflow


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be an int >= 1 or None, got 0"),
        ({"concurrency": True}, "concurrency must be an int >= 1 or None, got True"),
        ({"min_success_ratio": 1.5}, "min_success_ratio must be a number from 0 to 1, got 1.5"),
        ({"min_success_ratio": "all"}, "min_success_ratio must be a number from 0 to 1"),
    ],
)
def test_bad_map_options_name_the_value(options: dict[str, object], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        sluice.map(add, **options)  # type: ignore[arg-type]


def test_map_needs_a_task() -> None:
    with pytest.raises(DefinitionError, match=r"map needs a @sluice\.task"):
        sluice.map(len)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="items= is required"):
        sluice.map(add)()


@sluice.dynamic
def chain(depth: int, start: int) -> int:
    value = start
    for _ in range(depth):
        value = add(x=value, y=1)
    return value


def test_dynamic_is_one_node_of_type_dynamic() -> None:
    @sluice.workflow
    def wf(depth: int) -> int:
        return chain(depth=depth, start=10)

    (node,) = wf.spec.nodes
    assert wf.spec.tasks[node.task].type == "dynamic"
    assert c.build_task(wf.spec.tasks[node.task]).interface.outputs == {
        "workflow": TypeSpec(kind="json")
    }


def test_dynamic_body_builds_a_workflow_from_real_inputs() -> None:
    built = chain.build({"depth": 3, "start": 10})
    assert [n.id for n in built.nodes] == ["add", "add-2", "add-3"]
    assert built.nodes[0].inputs["x"].value == 10
    assert built.outputs["o0"].node == "add-3"
    again = WorkflowSpec.model_validate(chain.execute_json({"depth": 3, "start": 10})["workflow"])
    assert again == built
    assert chain.build({"depth": 0, "start": 7}).outputs["o0"].value == 7
    assert chain(depth=2, start=1) == 3  # outside a workflow: plain Python


def test_dynamic_children_are_rebased_under_the_parent() -> None:
    built = chain.build({"depth": 2, "start": 0})
    specs = c.dynamic_child_specs("d", built)
    assert [s.id for s in specs] == ["d.add", "d.add-2"]
    assert specs[1].inputs["x"].node == "d.add"
    assert c.rebase(built.outputs["o0"], "d").node == "d.add-2"


def test_a_dynamic_body_must_return_its_declared_outputs() -> None:
    @sluice.dynamic
    def two(n: int) -> int:
        return (add(x=n), add(x=n))  # type: ignore[return-value]

    with pytest.raises(DefinitionError, match="returns 2 values, annotated 1"):
        two.build({"n": 1})


def test_required_successes_and_child_ids() -> None:
    assert [c.required_successes(10, r) for r in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0, 3, 5, 8, 10]
    assert c.required_successes(3, 0.7) == 3 and c.required_successes(0, 1.0) == 0
    assert c.map_child_id("m", 3) == "m[3]"
    known = {"d", "d.m"}
    assert c.parent_of("d.m[2]", known) == "d.m"
    assert c.parent_of("d:build", known) == "d" and c.parent_of("x", known) is None
