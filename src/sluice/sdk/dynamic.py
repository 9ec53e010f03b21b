"""`@sluice.dynamic`: a task whose body builds a workflow from its inputs when it runs
(Flyte's @dynamic). Inside the body the inputs are real values, so loops and ifs over them
are allowed; calling tasks (or `sluice.map`, or other dynamic tasks) adds nodes, and what
the body returns (promises or values) becomes the task's outputs once those nodes succeed.

In a workflow it is one node: the engine runs the body in a worker (a `:build` child node),
records the workflow it returned, then runs that workflow's nodes as children of the node
(spec/compound.py). Called outside a workflow it runs the body as plain Python.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, overload

from sluice.errors import DefinitionError
from sluice.sdk.interface import decode_inputs
from sluice.sdk.task import Cache, TaskDef, make_task_spec
from sluice.sdk.workflow import _BUILDER, _Builder, _workflow_outputs
from sluice.spec.canonical import digest
from sluice.spec.compound import BUILD_OUTPUT, DYNAMIC_TYPE
from sluice.spec.models import Interface, Quota, WorkflowSpec
from sluice.spec.validate import validate_workflow

P = ParamSpec("P")
R = TypeVar("R")


class DynamicDef(TaskDef[P, R]):
    """A dynamic task: its spec (type "dynamic") and the function that builds its workflow."""

    def execute_json(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Run the body on JSON inputs under a workflow builder; the built workflow's JSON
        (what the worker returns for the `:build` node)."""
        return {BUILD_OUTPUT: self.build(inputs).model_dump(mode="json")}

    def build(self, inputs: dict[str, Any]) -> WorkflowSpec:
        spec = self.spec
        where = f"dynamic task {spec.name!r}"
        values = decode_inputs(self.params, inputs, where)
        builder = _Builder(spec.name)
        token = _BUILDER.set(builder)
        try:
            result = self.fn(**values)  # type: ignore[call-arg]
        finally:
            _BUILDER.reset(token)
        if inspect.isawaitable(result):
            raise DefinitionError(f"{where}: a dynamic task's body must not be async")
        declared = Interface(outputs=spec.interface.outputs)
        outputs, types_ = _workflow_outputs(result, declared, where)
        draft = WorkflowSpec(
            name=spec.name,
            version="",
            tasks=builder.tasks,
            nodes=tuple(builder.nodes),
            outputs=outputs,
            interface=Interface(outputs=types_),
        )
        validate_workflow(draft)
        return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})


@overload
def dynamic(fn: Callable[P, R], /) -> DynamicDef[P, R]: ...


@overload
def dynamic(
    *,
    name: str | None = None,
    retries: int = 0,
    timeout: float | None = None,
    cache: bool | Cache = False,
    quotas: Sequence[Quota] = (),
    priority: int = 0,
) -> Callable[[Callable[P, R]], DynamicDef[P, R]]: ...


def dynamic(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retries: int = 0,
    timeout: float | None = None,
    cache: bool | Cache = False,
    quotas: Sequence[Quota] = (),
    priority: int = 0,
) -> DynamicDef[P, R] | Callable[[Callable[P, R]], DynamicDef[P, R]]:
    """Make a dynamic task of a function whose body calls tasks on its (real) inputs.

    `retries`, `timeout`, `cache` and `quotas` apply to running the body (building the
    workflow); the nodes it builds have their own, from their tasks."""

    def wrap(func: Callable[P, R]) -> DynamicDef[P, R]:
        if inspect.iscoroutinefunction(func):
            raise DefinitionError(f"dynamic task {func.__qualname__!r} must not be async")
        spec = make_task_spec(
            func,
            name=name,
            retries=retries,
            timeout=timeout,
            cache=cache,
            quotas=quotas,
            locks=None,
            interruptible=False,
            task_type=DYNAMIC_TYPE,
            custom=None,
            priority=priority,
        )
        return DynamicDef(func, spec)

    return wrap(fn) if fn is not None else wrap
