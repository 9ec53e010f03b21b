"""`sluice.map(task, concurrency=N, min_success_ratio=R)(items=..., fixed=...)`: Flyte's
map_task. In a workflow it adds ONE node whose items run as sub-tasks created at run time;
its outputs are lists, one entry per item (None for a failed item when R < 1).

The item goes to the task's one input that `fixed` does not bind (among the inputs without a
default when several are left). Called outside a workflow it runs the task on each item in
this process, as a plain loop.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from sluice.errors import DefinitionError
from sluice.sdk.task import TaskDef
from sluice.sdk.workflow import current_builder, to_binding
from sluice.spec.canonical import digest
from sluice.spec.compound import MAP_TYPE, MapOptions
from sluice.spec.models import Binding, InputSpec, Interface, TaskSpec
from sluice.spec.types import TypeSpec

_NO_ITEMS = object()


class MapTask:
    """A task mapped over a list; call it with `items=` (and `fixed=`) inside a workflow."""

    def __init__(
        self, task: TaskDef[Any, Any], concurrency: int | None, min_success_ratio: float
    ) -> None:
        where = f"map of task {getattr(task, 'name', task)!r}"
        if not isinstance(task, TaskDef):
            raise DefinitionError(f"{where}: map needs a @sluice.task, got {task!r}")
        _check_options(where, concurrency, min_success_ratio)
        self.task = task
        self.concurrency = concurrency
        self.min_success_ratio = float(min_success_ratio)
        self.where = where

    def __call__(self, items: Any = _NO_ITEMS, fixed: Mapping[str, Any] | None = None) -> Any:
        if items is _NO_ITEMS:
            raise DefinitionError(f"{self.where}: items= is required")
        fixed = dict(fixed or {})
        item_input = self.item_input(fixed)
        builder = current_builder()
        if builder is None:
            return [self.task.fn(**{item_input: item, **fixed}) for item in items]
        spec = self.spec(item_input, fixed)
        where = f"workflow {builder.name!r}: node {builder.next_id(spec)!r}"
        return builder.add_node(spec, self._bindings(spec, item_input, items, fixed, where))

    def item_input(self, fixed: Mapping[str, Any]) -> str:
        """The input each item goes to: the one `fixed` leaves, or the one without a default."""
        inputs = self.task.spec.interface.inputs
        unknown = sorted(set(fixed) - set(inputs))
        if unknown:
            raise DefinitionError(f"{self.where}: fixed input {unknown[0]!r} is not an input")
        left = [name for name in inputs if name not in fixed]
        if len(left) > 1:
            left = [name for name in left if not inputs[name].has_default]
        if len(left) != 1:
            raise DefinitionError(
                f"{self.where}: exactly one input must be left for the items, got {left}; "
                "bind the others with fixed={...}"
            )
        return left[0]

    def spec(self, item_input: str, fixed: Mapping[str, Any]) -> TaskSpec:
        inner = self.task.spec
        inputs = {
            name: InputSpec(type=TypeSpec(kind="list", args=(declared.type,)))
            if name == item_input
            else declared
            for name, declared in inner.interface.inputs.items()
            if name == item_input or name in fixed or declared.has_default
        }
        optional = self.min_success_ratio < 1.0
        outputs = {
            name: TypeSpec(
                kind="list", args=(TypeSpec(kind="optional", args=(t,)) if optional else t,)
            )
            for name, t in inner.interface.outputs.items()
        }
        options = MapOptions(
            task=inner,
            item_input=item_input,
            concurrency=self.concurrency,
            min_success_ratio=self.min_success_ratio,
        )
        prefix, _, short = inner.name.rpartition(".")
        draft = TaskSpec(
            name=f"{prefix}.map_{short}" if prefix else f"map_{short}",
            version="",
            type=MAP_TYPE,
            interface=Interface(inputs=inputs, outputs=outputs),
            custom=options.model_dump(mode="json"),
        )
        return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})

    def _bindings(
        self,
        spec: TaskSpec,
        item_input: str,
        items: Any,
        fixed: Mapping[str, Any],
        where: str,
    ) -> dict[str, Binding]:
        params = self.task.params
        declared = spec.interface.inputs
        bound = {
            item_input: to_binding(
                items,
                declared[item_input].type,
                typing.cast(Any, list)[params[item_input].annotation],
                f"{where} items",
            )
        }
        for name, value in fixed.items():
            bound[name] = to_binding(
                value, declared[name].type, params[name].annotation, f"{where} fixed {name!r}"
            )
        return bound


def _check_options(where: str, concurrency: Any, ratio: Any) -> None:
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise DefinitionError(
            f"{where}: concurrency must be an int >= 1 or None, got {concurrency!r}"
        )
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0.0 <= ratio <= 1.0:
        raise DefinitionError(
            f"{where}: min_success_ratio must be a number from 0 to 1, got {ratio!r}"
        )


def map(
    task: TaskDef[Any, Any],
    *,
    concurrency: int | None = None,
    min_success_ratio: float = 1.0,
) -> MapTask:
    """Map `task` over a list: `sluice.map(task, concurrency=4)(items=xs, fixed={"k": 1})`.

    At most `concurrency` items run at once (None: no bound of its own); the node succeeds
    when at least `min_success_ratio` of the items do."""
    return MapTask(task, concurrency, min_success_ratio)
