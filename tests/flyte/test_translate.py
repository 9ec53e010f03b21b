"""Translation of flytekit definitions (serialized in process by the real flytekit) to sluice
specs: types, metadata, bindings, launch plans, and clear refusals naming what is unsupported."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from sluice.errors import DefinitionError
from sluice.runtime import resolve_target
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
    with pytest.raises(DefinitionError, match=r"takes_a_dataclass'.*input 'point'"):
        resolve_target(_flows("shapes", "unsupported").takes_a_dataclass)


@pytest.mark.parametrize(
    ("workflow", "what"),
    [("branching", r"a branch \(conditional\)"), ("mapping", r"an array \(map_task\)")],
)
def test_an_unsupported_node_is_refused_naming_the_node(workflow: str, what: str) -> None:
    with pytest.raises(DefinitionError, match=f"node 'n0' is {what} node, not supported yet"):
        resolve_target(getattr(_flows("shapes", "unsupported"), workflow))


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
