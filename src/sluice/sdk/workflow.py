"""`@workflow`: built once by calling the function with promises, then validated.

Inside the build, calling a task adds a node and returns promises of its outputs; passing a
promise to another task binds that input to the upstream output. Calling a workflow inside
another inlines its nodes under a prefix.
"""

from __future__ import annotations

import contextvars
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from sluice.errors import DefinitionError, OutputsError
from sluice.sdk.interface import bind_arguments, build_inputs, build_outputs, input_annotations
from sluice.sdk.naming import module_name
from sluice.spec.canonical import digest
from sluice.spec.models import Binding, InputSpec, Interface, NodeSpec, TaskSpec, WorkflowSpec
from sluice.spec.names import check_entity_name
from sluice.spec.types import JSON, TypeSpec, is_assignable, to_json
from sluice.spec.validate import validate_workflow

if TYPE_CHECKING:
    from sluice.sdk.task import TaskDef

P = ParamSpec("P")
R = TypeVar("R")
_BUILDER: contextvars.ContextVar[_Builder | None] = contextvars.ContextVar(
    "sluice_workflow_builder", default=None
)


def current_builder() -> _Builder | None:
    return _BUILDER.get()


@dataclass(frozen=True)
class Promise:
    """A value that will exist when the workflow runs: a binding and its type."""

    binding: Binding
    type: TypeSpec
    description: str

    def __bool__(self) -> bool:
        raise DefinitionError(
            f"{self.description} is only known when the workflow runs; it cannot be used in an "
            "if or a loop condition while the workflow is built"
        )

    def __iter__(self) -> Any:
        raise DefinitionError(f"{self.description} cannot be iterated while the workflow is built")


class _Builder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[NodeSpec] = []
        self.tasks: dict[str, TaskSpec] = {}
        self._ids: dict[str, int] = {}

    def new_id(self, base: str) -> str:
        count = self._ids.get(base, 0) + 1
        self._ids[base] = count
        return base if count == 1 else f"{base}-{count}"

    def add_task_node(
        self, task: TaskDef[Any, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> Any:
        spec = task.spec
        node_id = self.new_id(spec.name.rpartition(".")[2])
        where = f"workflow {self.name!r}: node {node_id!r}"
        values = bind_arguments(task.fn, args, kwargs, where)
        inputs = self.bind_inputs(spec.interface, values, task.params, where)
        upstream = sorted(set().union(*(b.upstream_nodes() for b in inputs.values())))
        self.nodes.append(
            NodeSpec(id=node_id, task=spec.key, inputs=inputs, upstream=tuple(upstream))
        )
        self.tasks[spec.key] = spec
        return _output_promises(node_id, spec.interface, task.fn)

    def add_node(self, spec: TaskSpec, inputs: dict[str, Binding]) -> Any:
        """Add a node of `spec` (a map, a launch plan call) with bound inputs; its promises."""
        node_id = self.new_id(spec.name.rpartition(".")[2])
        upstream = sorted(set().union(*(b.upstream_nodes() for b in inputs.values())))
        self.nodes.append(
            NodeSpec(id=node_id, task=spec.key, inputs=inputs, upstream=tuple(upstream))
        )
        self.tasks[spec.key] = spec
        promises = [
            Promise(
                Binding(kind="output", node=node_id, output=name),
                t,
                f"output {name!r} of {node_id!r}",
            )
            for name, t in spec.interface.outputs.items()
        ]
        return None if not promises else promises[0] if len(promises) == 1 else tuple(promises)

    def next_id(self, spec: TaskSpec) -> str:
        """The id the next node of `spec` will get (for messages naming it)."""
        base = spec.name.rpartition(".")[2]
        count = self._ids.get(base, 0) + 1
        return base if count == 1 else f"{base}-{count}"

    def bind_inputs(
        self,
        interface: Interface,
        values: Mapping[str, Any],
        params: Mapping[str, inspect.Parameter],
        where: str,
    ) -> dict[str, Binding]:
        bindings = {}
        for name, spec in interface.inputs.items():
            if name in values:
                bindings[name] = to_binding(
                    values[name], spec.type, params[name].annotation, f"{where} input {name!r}"
                )
            elif not spec.has_default:
                raise DefinitionError(f"{where} input {name!r} is not bound and has no default")
        return bindings


def _output_promises(node_id: str, interface: Interface, fn: Callable[..., Any]) -> Any:
    promises = [
        Promise(
            Binding(kind="output", node=node_id, output=name),
            spec,
            f"output {name!r} of node {node_id!r}",
        )
        for name, spec in interface.outputs.items()
    ]
    if not promises:
        return None
    if list(interface.outputs) == ["o0"]:
        return promises[0]
    annotation = typing.get_type_hints(fn).get("return")
    if isinstance(annotation, type) and hasattr(annotation, "_fields"):
        return annotation(*promises)  # a NamedTuple: outputs reachable by name
    return tuple(promises)


def to_binding(value: Any, target: TypeSpec, annotation: Any, where: str) -> Binding:
    """Bind a promise, a constant, or a list/dict mixing both, checking types."""
    if isinstance(value, Promise):
        if not is_assignable(value.type, target):
            raise DefinitionError(
                f"{where}: expected {target}, got {value.type} from {value.description}"
            )
        return value.binding
    if isinstance(value, list | tuple) and _holds_promise(value):
        if target.kind not in ("list", "json"):
            raise DefinitionError(f"{where}: expected {target}, got a list")
        item = target.args[0] if target.kind == "list" else JSON
        items = tuple(to_binding(v, item, Any, f"{where}[{i}]") for i, v in enumerate(value))
        return Binding(kind="list", items=items)
    if isinstance(value, dict) and _holds_promise(value):
        if target.kind not in ("dict", "json"):
            raise DefinitionError(f"{where}: expected {target}, got a dict")
        item = target.args[0] if target.kind == "dict" else JSON
        items = tuple(to_binding(v, item, Any, f"{where}[{k!r}]") for k, v in value.items())
        return Binding(kind="dict", items=items, keys=tuple(value))
    try:
        return Binding(kind="constant", value=to_json(annotation, value, where))
    except OutputsError as exc:
        raise DefinitionError(str(exc)) from None


def _holds_promise(value: Any) -> bool:
    items = value.values() if isinstance(value, dict) else value
    return any(
        isinstance(v, Promise) or (isinstance(v, list | tuple | dict) and _holds_promise(v))
        for v in items
    )


class WorkflowDef(Generic[P, R]):
    """A workflow: built into a WorkflowSpec on first use, then immutable."""

    def __init__(self, fn: Callable[P, R], name: str | None = None) -> None:
        self.fn = fn
        self.name = f"{module_name(fn)}.{fn.__qualname__}" if name is None else name
        check_entity_name("workflow name", self.name, DefinitionError)
        self._spec: WorkflowSpec | None = None

    @property
    def spec(self) -> WorkflowSpec:
        if self._spec is None:
            self._spec = _build(self)
        return self._spec

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        builder = current_builder()
        if builder is not None:
            return _inline(builder, self, args, kwargs)  # type: ignore[no-any-return]
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


def _build(wf: WorkflowDef[Any, Any]) -> WorkflowSpec:
    where = f"workflow {wf.name!r}"
    declared = build_outputs(wf.fn, where) if _annotated_return(wf.fn) else {}
    interface = Interface(inputs=build_inputs(wf.fn, where), outputs=declared)
    builder = _Builder(wf.name)
    promises = {
        name: Promise(Binding(kind="input", name=name), spec.type, f"workflow input {name!r}")
        for name, spec in interface.inputs.items()
    }
    token = _BUILDER.set(builder)
    try:
        result = wf.fn(**promises)
    finally:
        _BUILDER.reset(token)
    outputs, output_types = _workflow_outputs(result, interface, where)
    draft = WorkflowSpec(
        name=wf.name,
        version="",
        tasks=builder.tasks,
        nodes=tuple(builder.nodes),
        outputs=outputs,
        interface=Interface(inputs=interface.inputs, outputs=output_types),
    )
    validate_workflow(draft)
    version = digest(draft.model_dump(mode="json"))[:16]
    return draft.model_copy(update={"version": version})


def _annotated_return(fn: Callable[..., Any]) -> bool:
    return inspect.signature(fn).return_annotation is not inspect.Signature.empty


def _workflow_outputs(
    result: Any, interface: Interface, where: str
) -> tuple[dict[str, Binding], dict[str, TypeSpec]]:
    if result is None:
        return {}, {}
    values = list(result) if isinstance(result, tuple) else [result]
    names = list(interface.outputs) or [f"o{i}" for i in range(len(values))]
    if len(names) != len(values):
        raise DefinitionError(f"{where}: returns {len(values)} values, annotated {len(names)}")
    bindings, types_ = {}, {}
    for name, value in zip(names, values, strict=True):
        declared = interface.outputs.get(name)
        inferred = value.type if isinstance(value, Promise) else declared or JSON
        bindings[name] = to_binding(value, declared or inferred, Any, f"{where} output {name!r}")
        types_[name] = declared or inferred
    return bindings, types_


def _inline(
    builder: _Builder, sub: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Any:
    spec = sub.spec
    prefix = builder.new_id(spec.name.rpartition(".")[2])
    where = f"workflow {builder.name!r}: sub-workflow node {prefix!r}"
    values = bind_arguments(sub.fn, args, kwargs, where)
    params = input_annotations(sub.fn, where)
    bound = {
        name: to_binding(values[name], s.type, params[name].annotation, f"{where} input {name!r}")
        for name, s in spec.interface.inputs.items()
        if name in values
    }
    bound |= {
        name: Binding(kind="constant", value=s.default)
        for name, s in spec.interface.inputs.items()
        if name not in values and s.has_default
    }
    missing = sorted(set(spec.interface.inputs) - set(bound))
    if missing:
        raise DefinitionError(f"{where} input {missing[0]!r} is not bound and has no default")
    for node in spec.nodes:
        inputs = {k: _rebase(b, prefix, bound) for k, b in node.inputs.items()}
        upstream = tuple(f"{prefix}.{u}" for u in node.upstream) + tuple(
            sorted(
                set().union(*(b.upstream_nodes() for b in inputs.values()))
                - {f"{prefix}.{u}" for u in node.upstream}
            )
        )
        builder.nodes.append(
            NodeSpec(id=f"{prefix}.{node.id}", task=node.task, inputs=inputs, upstream=upstream)
        )
    builder.tasks.update(spec.tasks)
    promises = [
        Promise(
            _rebase(b, prefix, bound),
            spec.interface.outputs[name],
            f"output {name!r} of sub-workflow {prefix!r}",
        )
        for name, b in spec.outputs.items()
    ]
    return None if not promises else promises[0] if len(promises) == 1 else tuple(promises)


def _rebase(binding: Binding, prefix: str, inputs: Mapping[str, Binding]) -> Binding:
    if binding.kind == "input":
        return inputs[binding.name]
    if binding.kind == "output":
        return binding.model_copy(update={"node": f"{prefix}.{binding.node}"})
    if binding.kind in ("list", "dict"):
        return binding.model_copy(
            update={"items": tuple(_rebase(i, prefix, inputs) for i in binding.items)}
        )
    return binding


def workflow(
    fn: Callable[P, R] | None = None, /, *, name: str | None = None
) -> WorkflowDef[P, R] | Callable[[Callable[P, R]], WorkflowDef[P, R]]:
    """Make a workflow of a function whose body calls tasks and other workflows."""

    def wrap(func: Callable[P, R]) -> WorkflowDef[P, R]:
        return WorkflowDef(func, name)

    return wrap(fn) if fn is not None else wrap


def task_workflow(task: TaskDef[Any, Any]) -> WorkflowSpec:
    """A one-node workflow around a task, so a task can be run on its own."""
    spec = task.spec
    inputs = {name: Binding(kind="input", name=name) for name in spec.interface.inputs}
    node_id = spec.name.rpartition(".")[2]
    outputs = {
        name: Binding(kind="output", node=node_id, output=name) for name in spec.interface.outputs
    }
    interface = Interface(
        inputs={
            k: InputSpec(type=v.type, default=v.default, has_default=v.has_default)
            for k, v in spec.interface.inputs.items()
        },
        outputs=dict(spec.interface.outputs),
    )
    draft = WorkflowSpec(
        name=spec.name,
        version=spec.version,
        interface=interface,
        nodes=(NodeSpec(id=node_id, task=spec.key, inputs=inputs),),
        outputs=outputs,
        tasks={spec.key: spec},
    )
    validate_workflow(draft)
    return draft
