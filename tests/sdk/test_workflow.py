"""@workflow: nodes and bindings built from promises, sub-workflows, definition errors naming
the node and input, stable versions, and validation of hand-made specs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.support import foundation_flows as flows

from sluice import WorkflowDef, task, workflow
from sluice.errors import DefinitionError
from sluice.sdk.workflow import task_workflow
from sluice.spec.models import (
    Binding,
    InputSpec,
    Interface,
    NodeSpec,
    TaskSpec,
    WorkflowSpec,
)
from sluice.spec.types import TypeSpec
from sluice.spec.validate import topological_order, validate_workflow

INT, STR = TypeSpec(kind="int"), TypeSpec(kind="str")


def inp(name: str) -> Binding:
    return Binding(kind="input", name=name)


def out(node: str, output: str = "o0") -> Binding:
    return Binding(kind="output", node=node, output=output)


def const(value: Any) -> Binding:
    return Binding(kind="constant", value=value)


# --- structure -------------------------------------------------------------------------------


def test_nodes_bindings_and_upstream() -> None:
    spec = flows.pipeline.spec
    assert isinstance(flows.pipeline, WorkflowDef)
    assert spec.name == f"{flows.__name__}.pipeline"
    assert [n.id for n in spec.nodes] == ["add", "add-2", "stats", "add-3"]
    add, add2, stats, add3 = spec.nodes
    assert add.task == flows.add.spec.key
    assert add.inputs == {"a": inp("x")}  # b keeps the task default: not bound
    assert add.upstream == ()
    assert add2.inputs == {"a": out("add"), "b": inp("y")}
    assert add2.upstream == ("add",)
    assert stats.inputs == {"xs": Binding(kind="list", items=(out("add"), out("add-2"), const(3)))}
    assert stats.upstream == ("add", "add-2")
    assert add3.inputs == {"a": out("stats", "total"), "b": const(7)}
    assert add3.upstream == ("stats",)
    assert spec.outputs == {"o0": out("add-3")}
    assert set(spec.tasks) == {flows.add.spec.key, flows.stats.spec.key}
    assert spec.tasks[flows.add.spec.key] == flows.add.spec


def test_interface_inputs_defaults_and_outputs() -> None:
    interface = flows.pipeline.spec.interface
    assert interface.inputs == {
        "x": InputSpec(type=INT),
        "y": InputSpec(type=INT, default=5, has_default=True),
    }
    assert interface.outputs == {"o0": INT}


def test_fan_in_list_of_promises() -> None:
    spec = flows.fan.spec
    assert [n.id for n in spec.nodes] == ["add", "add-2", "add-3", "stats"]
    assert [n.inputs["b"] for n in spec.nodes[:3]] == [const(0), const(1), const(2)]
    stats = spec.node("stats")
    assert stats.inputs["xs"] == Binding(
        kind="list", items=(out("add"), out("add-2"), out("add-3"))
    )
    assert stats.upstream == ("add", "add-2", "add-3")


def test_dict_of_promises() -> None:
    binding = flows.keyed.spec.node("total").inputs["values"]
    assert binding.kind == "dict"
    assert binding.keys == ("one", "two", "three")
    assert binding.items == (out("add"), out("add-2"), const(3))
    assert flows.keyed.spec.node("total").upstream == ("add", "add-2")


def test_int_output_binds_to_float_input() -> None:
    assert flows.floats.spec.node("fmt").inputs == {"value": out("add")}


def test_sub_workflow_is_inlined_under_a_prefix() -> None:
    spec = flows.outer.spec
    inner = flows.pipeline.spec
    assert [n.id for n in spec.nodes] == [f"pipeline.{n.id}" for n in inner.nodes] + ["add"]
    first = spec.node("pipeline.add")
    assert first.inputs == {"a": inp("z")}  # the sub-workflow input is rebound to ours
    second = spec.node("pipeline.add-2")
    assert second.inputs == {"a": out("pipeline.add"), "b": const(5)}  # its default
    assert second.upstream == ("pipeline.add",)
    assert spec.node("pipeline.stats").inputs["xs"].items[:2] == (
        out("pipeline.add"),
        out("pipeline.add-2"),
    )
    last = spec.node("add")
    assert last.inputs == {"a": out("pipeline.add-3")}
    assert last.upstream == ("pipeline.add-3",)
    assert spec.outputs == {"o0": out("add")}
    validate_workflow(spec)


def test_sub_workflow_called_twice_gets_two_prefixes() -> None:
    spec = flows.twice.spec
    prefixes = sorted({n.id.split(".")[0] for n in spec.nodes})
    assert prefixes == ["pipeline", "pipeline-2"]
    assert spec.node("pipeline.add-2").inputs["b"] == const(1)
    assert spec.node("pipeline-2.add-2").inputs["b"] == const(5)
    assert spec.outputs == {"o0": out("pipeline.add-3"), "o1": out("pipeline-2.add-3")}
    assert spec.interface.outputs == {"o0": INT, "o1": INT}


def test_unannotated_workflow_outputs_are_inferred() -> None:
    spec = flows.unannotated.spec
    assert spec.outputs == {"o0": out("split", "o0"), "o1": out("split", "o1")}
    assert spec.interface.outputs == {"o0": INT, "o1": STR}


def test_named_tuple_outputs_are_reachable_by_name_in_a_workflow() -> None:
    """`stats(...)` returns a NamedTuple: `.mean` must be a promise of that output, also in
    modules using `from __future__ import annotations` (as STYLE.md asks)."""
    spec = flows.named_outputs.spec
    assert spec.outputs == {"o0": out("stats", "mean")}


def test_workflow_called_outside_a_build_runs_locally() -> None:
    # add(2)=4; add(4,5)=9; stats([4, 9, 3]).total=16; add(16, 7)=23
    assert flows.pipeline(2) == 23
    assert flows.outer(2) == 25


def test_constant_positional_and_keyword_arguments() -> None:
    @workflow
    def positional(x: int) -> int:
        return flows.add(x, 10)

    node = positional.spec.nodes[0]
    assert node.inputs == {"a": inp("x"), "b": const(10)}


def test_workflow_input_can_be_returned_directly() -> None:
    @workflow
    def echo(x: int) -> int:
        return x

    assert echo.spec.nodes == ()
    assert echo.spec.outputs == {"o0": inp("x")}


def test_task_workflow_wraps_one_task() -> None:
    spec = task_workflow(flows.add)
    assert [n.id for n in spec.nodes] == ["add"]
    assert spec.nodes[0].inputs == {"a": inp("a"), "b": inp("b")}
    assert spec.interface.inputs["b"].default == 2
    assert spec.outputs == {"o0": out("add")}


# --- errors ------------------------------------------------------------------------------------


def _unknown_input(x: int) -> int:
    return flows.add(a=x, c=1)  # type: ignore[call-arg]


def _missing_input(x: int) -> int:
    return flows.add(b=x)  # type: ignore[call-arg]


def _promise_type_mismatch(x: int) -> str:
    return flows.shout(s=flows.add(a=x))  # type: ignore[arg-type]


def _constant_type_mismatch(x: int) -> str:
    return flows.shout(s=5)  # type: ignore[arg-type]


def _list_item_mismatch(x: int) -> int:
    return flows.stats(xs=[flows.add(a=x), flows.shout(s="a")])[0]  # type: ignore[list-item]


def _wrong_output_type(x: int) -> str:
    return flows.add(a=x)  # type: ignore[return-value]


def _too_many_positional(x: int) -> int:
    return flows.add(x, 1, 2)  # type: ignore[call-arg]


def _promise_in_if(x: int) -> int:
    result = flows.add(a=x)
    if result:
        return result
    return x


def _promise_in_loop(x: int) -> int:
    for _ in flows.add(a=x):  # type: ignore[attr-defined]
        pass
    return x


def _output_count(x: int) -> tuple[int, int]:
    return flows.add(a=x)  # type: ignore[return-value]


def _sub_workflow_unknown_input(z: int) -> int:
    return flows.pipeline(x=z, nope=1)  # type: ignore[call-arg]


def _sub_workflow_missing_input(z: int) -> int:
    return flows.pipeline(y=z)  # type: ignore[call-arg]


def _sub_workflow_mismatch(z: str) -> int:
    return flows.pipeline(x=z)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fn", "fragments"),
    [
        (_unknown_input, ["node 'add'", "'c'"]),
        (_missing_input, ["node 'add'", "input 'a'", "not bound"]),
        (_promise_type_mismatch, ["node 'shout'", "input 's'", "expected str", "node 'add'"]),
        (_constant_type_mismatch, ["node 'shout'", "input 's'"]),
        (_list_item_mismatch, ["node 'stats'", "input 'xs'", "[1]", "expected int"]),
        (_wrong_output_type, ["output 'o0'", "expected str", "node 'add'"]),
        (_too_many_positional, ["node 'add'", "positional"]),
        (_promise_in_if, ["node 'add'", "if"]),
        (_promise_in_loop, ["node 'add'", "iterated"]),
        (_output_count, ["returns 1 values", "annotated 2"]),
        (_sub_workflow_unknown_input, ["node 'pipeline'", "'nope'"]),
        (_sub_workflow_missing_input, ["node 'pipeline'", "input 'x'"]),
        (_sub_workflow_mismatch, ["node 'pipeline'", "input 'x'", "expected int"]),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_definition_errors_name_the_node_and_input(
    fn: Callable[..., Any], fragments: list[str]
) -> None:
    with pytest.raises(DefinitionError) as caught:
        _ = workflow(fn).spec  # type: ignore[union-attr]
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_definition_errors_name_the_workflow() -> None:
    with pytest.raises(DefinitionError, match=r"workflow '.*_missing_input'"):
        _ = workflow(_missing_input).spec  # type: ignore[union-attr]


def test_a_bad_workflow_parameter_type_is_refused() -> None:
    def takes_set(values: set[int]) -> int:
        return 1

    with pytest.raises(DefinitionError, match="parameter 'values'"):
        _ = workflow(takes_set).spec  # type: ignore[union-attr]


# --- versions ----------------------------------------------------------------------------------


def _build(fn: Callable[..., Any], name: str = "demo.wf") -> WorkflowSpec:
    return workflow(name=name)(fn).spec  # type: ignore[union-attr]


def _ten(x: int) -> int:
    return flows.add(a=x, b=10)


def _eleven(x: int) -> int:
    return flows.add(a=x, b=11)


def _ten_with_default(x: int = 1) -> int:
    return flows.add(a=x, b=10)


def test_spec_version_is_stable_across_builds() -> None:
    first = _build(_ten)
    second = _build(_ten)
    assert first.version == second.version
    assert first == second
    wf = workflow(_ten)
    assert wf.spec is wf.spec  # type: ignore[union-attr]


def test_spec_version_changes_when_the_workflow_changes() -> None:
    base = _build(_ten).version
    assert _build(_eleven).version != base
    assert _build(_ten_with_default).version != base
    assert _build(_ten, name="demo.other").version != base


def test_spec_version_changes_when_a_task_changes() -> None:
    def one(a: int) -> int:
        return a

    def two(a: int) -> int:
        return a + 1

    def make(fn: Callable[..., Any]) -> WorkflowSpec:
        step = task(name="demo.step")(fn)

        def body(x: int) -> int:
            return step(a=x)  # type: ignore[no-any-return]

        return _build(body)

    assert make(one).version == make(one).version
    assert make(one).version != make(two).version


# --- validate_workflow on hand-made specs ---------------------------------------------------------


def _task(name: str = "t") -> TaskSpec:
    return TaskSpec(
        name=name,
        version="1",
        interface=Interface(inputs={"a": InputSpec(type=INT)}, outputs={"o0": INT}),
    )


def _spec(*nodes: NodeSpec, outputs: dict[str, Binding] | None = None) -> WorkflowSpec:
    task_spec = _task()
    return WorkflowSpec(
        name="hand",
        version="1",
        interface=Interface(inputs={"x": InputSpec(type=INT)}, outputs={"o0": INT}),
        nodes=nodes,
        outputs=outputs or {},
        tasks={task_spec.key: task_spec},
    )


def _node(node_id: str, a: Binding, upstream: tuple[str, ...] = ()) -> NodeSpec:
    return NodeSpec(id=node_id, task="t@1", inputs={"a": a}, upstream=upstream)


def test_validate_workflow_returns_a_topological_order() -> None:
    spec = _spec(
        _node("c", out("b")),
        _node("b", out("a")),
        _node("a", inp("x")),
        _node("d", inp("x"), upstream=("c",)),
        outputs={"o0": out("d")},
    )
    order = validate_workflow(spec)
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order.index("a") < order.index("b") < order.index("c") < order.index("d")
    standalone = topological_order(spec)
    assert standalone.index("a") < standalone.index("b") < standalone.index("c")


def test_validate_workflow_detects_a_cycle_naming_the_nodes() -> None:
    spec = _spec(
        _node("first", out("second")), _node("second", out("first")), _node("ok", inp("x"))
    )
    with pytest.raises(DefinitionError) as caught:
        validate_workflow(spec)
    message = str(caught.value)
    assert "cycle" in message
    assert "'first'" in message and "'second'" in message
    assert "'ok'" not in message


def test_validate_workflow_detects_a_cycle_through_ordering_only() -> None:
    spec = _spec(_node("a", inp("x"), upstream=("b",)), _node("b", inp("x"), upstream=("a",)))
    with pytest.raises(DefinitionError, match="cycle"):
        validate_workflow(spec)


def test_validate_workflow_detects_a_self_loop() -> None:
    with pytest.raises(DefinitionError, match="'a'"):
        validate_workflow(_spec(_node("a", out("a"))))


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        (_spec(_node("a", out("ghost"))), ["node 'a'", "input 'a'", "unknown node 'ghost'"]),
        (
            _spec(_node("a", inp("nope"))),
            ["node 'a'", "input 'a'", "unknown workflow input 'nope'"],
        ),
        (_spec(_node("a", inp("x"), upstream=("ghost",))), ["node 'a'", "'ghost'"]),
        (_spec(_node("a", inp("x")), _node("a", inp("x"))), ["'a'", "twice"]),
        (_spec(_node("b", out("a", "o9")), _node("a", inp("x"))), ["node 'b'", "'o9'"]),
        (_spec(_node("a", const("text"))), ["node 'a'", "input 'a'", "expected int"]),
        (_spec(_node("a", Binding(kind="list"))), ["node 'a'", "input 'a'", "list"]),
        (_spec(_node("a", inp("x")), outputs={"zz": out("a")}), ["output 'zz'"]),
        (_spec(NodeSpec(id="a", task="t@1")), ["node 'a'", "input 'a'", "not bound"]),
        (_spec(NodeSpec(id="a", task="t@9", inputs={"a": inp("x")})), ["node 'a'", "'t@9'"]),
        (
            _spec(NodeSpec(id="a", task="t@1", inputs={"a": inp("x"), "b": inp("x")})),
            ["node 'a'", "no input 'b'"],
        ),
    ],
)
def test_validate_workflow_errors_name_the_node_and_input(
    spec: WorkflowSpec, fragments: list[str]
) -> None:
    with pytest.raises(DefinitionError) as caught:
        validate_workflow(spec)
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))


def test_validate_workflow_accepts_a_spec_read_back_from_json() -> None:
    spec = WorkflowSpec.model_validate_json(flows.outer.spec.model_dump_json())
    assert spec == flows.outer.spec
    assert sorted(validate_workflow(spec)) == sorted(n.id for n in spec.nodes)
