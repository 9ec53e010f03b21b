"""Compound nodes: a node whose work is a set of child nodes created when it runs.

Three kinds, each named by the node's task type:
- `map` (Flyte's map_task): one child per item of a list input, `{node}[{index}]`, each an
  ordinary node of the mapped task (its own attempts, cache entry, quotas and locks). The
  map task's `custom` holds the mapped task's spec and the map's options (MapOptions).
- `dynamic` (Flyte's @dynamic): a child `{node}:build` runs the function, which returns a
  workflow built from its inputs; that workflow's nodes then run as children `{node}.{id}`.
- `launch_plan`: a launch plan called as a node starts a child EXECUTION of it (id from
  `child_execution_id`), under the launch plan's concurrency policy, and ends as it ends.

Children are never in the WorkflowSpec: they are derived from the parent's inputs (map) or
from the build child's outputs (dynamic), so the store keeps one row per started child and
nothing else. Functions here are pure: the engine and the service both use them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from sluice.errors import DefinitionError
from sluice.spec.gates import GATE_TYPE
from sluice.spec.models import (
    Binding,
    Interface,
    LaunchPlanSpec,
    NodeSpec,
    SpecModel,
    TaskSpec,
    WorkflowSpec,
)
from sluice.spec.types import JSON
from sluice.spec.validate import dependencies, validate_workflow

MAP_TYPE = "map"
DYNAMIC_TYPE = "dynamic"
LAUNCH_PLAN_TYPE = "launch_plan"
COMPOUND_TYPES = frozenset({MAP_TYPE, DYNAMIC_TYPE, LAUNCH_PLAN_TYPE, GATE_TYPE})
"""Node types the engine steps itself, never a plugin (a gate: spec/gates.py)."""
BUILD_SUFFIX = ":build"
BUILD_OUTPUT = "workflow"


class MapOptions(SpecModel):
    """What a map task's `custom` holds: the mapped task and how its items run."""

    task: TaskSpec
    item_input: str
    zipped: tuple[str, ...] = ()
    """More list inputs taken item by item with `item_input` (Flyte maps every unbound input);
    they must be as long as it."""
    concurrency: int | None = Field(default=None, ge=1)
    min_success_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    min_successes: int | None = Field(default=None, ge=0)
    """How many items must succeed, in place of the ratio (Flyte's `min_successes`)."""

    @property
    def mapped(self) -> tuple[str, ...]:
        return (self.item_input, *self.zipped)

    def required(self, total: int) -> int:
        """How many of `total` items must succeed for the map node to succeed."""
        if self.min_successes is not None:
            return min(total, self.min_successes)
        return required_successes(total, self.min_success_ratio)

    def total(self, inputs: Mapping[str, Any], where: str) -> int:
        """The number of items; DefinitionError naming a zipped list of another length."""
        total = len(inputs[self.item_input])
        for name in self.zipped:
            if len(inputs[name]) != total:
                raise DefinitionError(
                    f"{where}: mapped input {name!r} has {len(inputs[name])} items, "
                    f"{self.item_input!r} has {total}"
                )
        return total


class LaunchPlanCall(SpecModel):
    """What a launch plan node's `custom` holds: the launch plan and its workflow."""

    launch_plan: LaunchPlanSpec
    workflow: WorkflowSpec


def is_compound(task: TaskSpec) -> bool:
    return task.type in COMPOUND_TYPES


def plugin_tasks(tasks: Iterable[TaskSpec]) -> Iterator[TaskSpec]:
    """The tasks a plugin runs: a map's mapped task and a dynamic task's build task in place
    of the compound ones."""
    for task in tasks:
        if task.type == MAP_TYPE:
            yield from plugin_tasks([map_options(task).task])
        elif task.type == DYNAMIC_TYPE:
            yield build_task(task)
        elif task.type == LAUNCH_PLAN_TYPE:
            yield from plugin_tasks(launch_plan_call(task).workflow.tasks.values())
        elif task.type != GATE_TYPE:
            yield task


def map_options(task: TaskSpec) -> MapOptions:
    return MapOptions.model_validate(task.custom)


def launch_plan_call(task: TaskSpec) -> LaunchPlanCall:
    return LaunchPlanCall.model_validate(task.custom)


def child_execution_id(execution_id: str, node_id: str) -> str:
    """The execution a launch plan node starts: the same for every try, so a node resumed
    after a crash finds the one it created instead of starting another."""
    return f"{execution_id}-{hashlib.sha256(node_id.encode()).hexdigest()[:10]}"


def required_successes(total: int, ratio: float) -> int:
    """How many of `total` items must succeed for a map node to succeed."""
    return min(total, math.ceil(total * ratio - 1e-9))


def map_child_id(parent: str, index: int) -> str:
    return f"{parent}[{index}]"


def map_child_spec(
    parent: NodeSpec, options: MapOptions, inputs: dict[str, Any], index: int
) -> NodeSpec:
    """The node of item `index`: the mapped task on that item and the fixed inputs."""
    bound = {
        name: Binding(kind="constant", value=value[index] if name in options.mapped else value)
        for name, value in inputs.items()
    }
    return NodeSpec(id=map_child_id(parent.id, index), task=options.task.key, inputs=bound)


def build_task(dynamic: TaskSpec) -> TaskSpec:
    """The task that runs a dynamic task's function: same inputs, one JSON output (the
    workflow it built); a python task, or the type `custom.build_type` names (a flytekit
    @dynamic task's `python-task`, run by the flyte plugin)."""
    interface = Interface(inputs=dynamic.interface.inputs, outputs={BUILD_OUTPUT: JSON})
    build_type = str(dynamic.custom.get("build_type", "python"))
    return dynamic.model_copy(update={"type": build_type, "interface": interface})


def build_child_spec(parent: NodeSpec, dynamic: TaskSpec, inputs: dict[str, Any]) -> NodeSpec:
    """The node that runs a dynamic task's function on the parent's inputs."""
    bound = {name: Binding(kind="constant", value=value) for name, value in inputs.items()}
    return NodeSpec(id=parent.id + BUILD_SUFFIX, task=build_task(dynamic).key, inputs=bound)


def built_workflow(outputs: dict[str, Any] | None, where: str) -> WorkflowSpec:
    """The workflow a dynamic task's build child returned, validated."""

    raw = (outputs or {}).get(BUILD_OUTPUT)
    try:
        spec = WorkflowSpec.model_validate(raw)
    except ValueError as exc:
        raise DefinitionError(
            f"{where}: the dynamic task returned no valid workflow: {exc}"
        ) from None
    validate_workflow(spec)
    return spec


def dynamic_child_id(parent: str, node_id: str) -> str:
    return f"{parent}.{node_id}"


def rebase(binding: Binding, parent: str) -> Binding:
    """A binding of the built workflow, its node references under the parent's prefix."""
    if binding.kind == "output":
        return binding.model_copy(update={"node": dynamic_child_id(parent, binding.node)})
    if binding.kind in ("list", "dict"):
        return binding.model_copy(update={"items": tuple(rebase(i, parent) for i in binding.items)})
    return binding


def dynamic_child_specs(parent: str, built: WorkflowSpec) -> list[NodeSpec]:
    return [
        NodeSpec(
            id=dynamic_child_id(parent, node.id),
            task=node.task,
            inputs={k: rebase(b, parent) for k, b in node.inputs.items()},
            upstream=tuple(dynamic_child_id(parent, u) for u in node.upstream),
        )
        for node in built.nodes
    ]


def parent_of(node_id: str, known: set[str] | frozenset[str]) -> str | None:
    """The compound node a child id belongs to, the longest known prefix; None for none."""
    for cut in range(len(node_id) - 1, 0, -1):
        if node_id[cut] in "[.:" and node_id[:cut] in known:
            return node_id[:cut]
    return None


StoredNode = tuple[dict[str, Any] | None, dict[str, Any] | None]
"""A stored node's (inputs, outputs)."""


@dataclass(frozen=True)
class ShownNode:
    """A node of an execution as shown: a child also names its parent, its task and what it
    waits for (its parent when nothing else)."""

    id: str
    parent: str | None = None
    task: TaskSpec | None = None
    depends_on: tuple[str, ...] = ()


def node_order(workflow: WorkflowSpec, stored: Mapping[str, StoredNode]) -> list[ShownNode]:
    """The workflow's nodes, each compound node followed by the children it created (those
    in `stored`), for showing an execution."""
    found: list[ShownNode] = []

    def visit(node: ShownNode) -> None:
        found.append(node)
        task = node.task
        if task is not None and is_compound(task) and node.id in stored:
            for child in _stored_children(node.id, task, stored):
                visit(child)

    for spec in workflow.nodes:
        visit(ShownNode(spec.id, None, workflow.tasks.get(spec.task)))
    return found


def _stored_children(
    node_id: str, task: TaskSpec, stored: Mapping[str, StoredNode]
) -> Iterator[ShownNode]:
    if task.type == GATE_TYPE:
        return
    if task.type == MAP_TYPE:
        inner, index = map_options(task).task, 0
        while map_child_id(node_id, index) in stored:
            yield ShownNode(map_child_id(node_id, index), node_id, inner, (node_id,))
            index += 1
        return
    build_id = node_id + BUILD_SUFFIX
    if build_id not in stored:
        return
    yield ShownNode(build_id, node_id, build_task(task), (node_id,))
    try:
        built = built_workflow(stored[build_id][1], node_id)
    except DefinitionError:
        return
    for spec in dynamic_child_specs(node_id, built):
        if spec.id in stored:
            deps = tuple(sorted(dependencies(spec))) or (build_id,)
            yield ShownNode(spec.id, node_id, built.tasks[spec.task], deps)
