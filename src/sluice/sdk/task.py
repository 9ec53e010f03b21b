"""`@task`: a Python function becomes a TaskSpec; called inside a @workflow it adds a node."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel

from sluice.errors import DefinitionError
from sluice.locks.names import template_problem
from sluice.locks.rate_keys import key_problem
from sluice.sdk.interface import (
    build_interface,
    decode_inputs,
    encode_outputs,
    input_annotations,
    output_annotations,
)
from sluice.sdk.naming import module_file, module_name
from sluice.spec.canonical import canonical_json, digest
from sluice.spec.models import (
    CacheSpec,
    Claims,
    Interface,
    LockSpec,
    Quota,
    RateLimit,
    SourceRef,
    TaskMetadata,
    TaskSpec,
)
from sluice.spec.names import check_entity_name
from sluice.spec.values import check_count, check_priority, check_seconds

P = ParamSpec("P")
R = TypeVar("R")
MAX_RETRIES = 1000


@dataclass(frozen=True)
class Cache:
    """Cache a task's outputs by its inputs. `version` is required: bump it when the
    function's behaviour changes. `serialize` makes concurrent runs with the same inputs wait
    for one computation instead of each running it."""

    version: str
    serialize: bool = False
    ignored_inputs: tuple[str, ...] = ()
    max_age: float | None = None


@dataclass(frozen=True)
class Locks:
    """Lock names computed from a task's inputs when its node starts: a template such as
    "db/partition/{partition}", once per item of the list input `for_each` if given."""

    template: str
    for_each: str = ""

    def __post_init__(self) -> None:
        for field in ("template", "for_each"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise DefinitionError(f"Locks {field} must be a string, got {value!r}")


LockArg = str | Locks | Callable[..., Sequence[str]] | Sequence[str | Locks]


def _source_version(fn: Callable[..., Any]) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = fn.__code__.co_code.hex()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cache_spec(cache: bool | Cache, where: str, interface: Interface) -> CacheSpec:
    if cache is False:
        return CacheSpec()
    if cache is True or not isinstance(cache, Cache):
        raise DefinitionError(
            f'{where}: cache needs a version, e.g. cache=Cache(version="1"), got cache={cache!r}'
        )
    if not isinstance(cache.serialize, bool):
        raise DefinitionError(f"{where}: Cache serialize must be a bool, got {cache.serialize!r}")
    if not isinstance(cache.version, str) or not cache.version:
        raise DefinitionError(
            f"{where}: Cache version must be a non-empty string, got {cache.version!r}"
        )
    if isinstance(cache.ignored_inputs, str) or not all(
        isinstance(n, str) for n in cache.ignored_inputs
    ):
        raise DefinitionError(
            f"{where}: Cache ignored_inputs must be input names, got {cache.ignored_inputs!r}"
        )
    unknown = sorted(set(cache.ignored_inputs) - set(interface.inputs))
    if unknown:
        raise DefinitionError(f"{where}: ignored input {unknown[0]!r} is not an input")
    if cache.max_age is not None:
        check_seconds(f"{where}: Cache max_age", cache.max_age, DefinitionError)
    return CacheSpec(
        enabled=True,
        version=cache.version,
        serialize=cache.serialize,
        ignored_inputs=tuple(cache.ignored_inputs),
        max_age=cache.max_age,
    )


def _lock_specs(locks: LockArg | None, where: str, interface: Interface) -> tuple[LockSpec, ...]:
    if locks is None:
        return ()
    items = [locks] if isinstance(locks, str | Locks) or callable(locks) else list(locks)
    return tuple(_lock_spec(item, where, interface) for item in items)


def _lock_spec(item: Any, where: str, interface: Interface) -> LockSpec:
    if isinstance(item, str):
        item = Locks(item)
    if isinstance(item, Locks):
        spec = LockSpec(template=item.template, for_each=item.for_each)
        problem = template_problem(spec, interface)
        if problem:  # the engine could never compute a name: refuse it now, not loop later
            raise DefinitionError(f"{where}: locks: {problem}")
        return spec
    if callable(item) and getattr(item, "__name__", "<lambda>") != "<lambda>":
        qualname = getattr(item, "__qualname__", "")
        if not qualname or "<locals>" in qualname:
            raise DefinitionError(
                f"{where}: locks function {qualname or item!r} must be defined at module level, "
                "so the engine can import it by name"
            )
        return LockSpec(function=f"{module_name(item)}:{qualname}")
    raise DefinitionError(
        f"{where}: locks must be a template string, Locks(...), or a module-level function, "
        f"got {item!r}"
    )


class TaskDef(Generic[P, R]):
    """A task: its spec, and its function for local calls and for the worker that runs it."""

    def __init__(self, fn: Callable[P, R], spec: TaskSpec) -> None:
        self.fn = fn
        self.spec = spec
        self.is_async = inspect.iscoroutinefunction(fn)
        where = f"task {spec.name!r}"
        self._params = input_annotations(fn, where)
        self._returns = output_annotations(fn, where)
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def params(self) -> dict[str, inspect.Parameter]:
        """Parameters with resolved annotations (computed once, at definition)."""
        return self._params

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        from sluice.sdk.workflow import current_builder

        builder = current_builder()
        if builder is not None:
            return builder.add_task_node(self, args, kwargs)  # type: ignore[no-any-return]
        return self.fn(*args, **kwargs)

    def execute_json(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Run the function on JSON inputs and return JSON outputs (what a worker does)."""
        where = f"task {self.spec.name!r}"
        values = decode_inputs(self._params, inputs, where)
        result = self.fn(**values)  # type: ignore[call-arg]
        if inspect.isawaitable(result):
            import asyncio  # only for async tasks: a worker of sync ones starts without it

            result = asyncio.run(_await(result))
        return encode_outputs(self._returns, result, where)

    def __repr__(self) -> str:
        return f"<task {self.spec.name}>"


async def _await(awaitable: Any) -> Any:
    return await awaitable


def make_task_spec(
    fn: Callable[..., Any],
    *,
    name: str | None,
    retries: int,
    timeout: float | None,
    cache: bool | Cache,
    quotas: Sequence[Quota],
    locks: LockArg | None,
    interruptible: bool,
    task_type: str,
    custom: dict[str, Any] | BaseModel | None,
    priority: int,
    rate_limits: Sequence[RateLimit] = (),
) -> TaskSpec:
    if isinstance(custom, BaseModel):  # a plugin's config model (RayJobConfig...): its JSON
        custom = custom.model_dump(mode="json", exclude_defaults=True)
    task_name = f"{module_name(fn)}.{fn.__qualname__}" if name is None else name
    check_entity_name("task name", task_name, DefinitionError)
    where = f"task {task_name!r}"
    check_count(f"{where}: retries", retries, DefinitionError, high=MAX_RETRIES)
    if timeout is not None:
        check_seconds(f"{where}: timeout", timeout, DefinitionError)
    check_priority(f"{where}: priority", priority, DefinitionError)
    _check_options(where, quotas, interruptible, task_type, custom)
    interface = build_interface(fn, where)
    metadata = TaskMetadata(
        retries=retries,
        timeout=timeout,
        interruptible=interruptible,
        cache=_cache_spec(cache, where, interface),
        priority=priority,
    )
    claims = Claims(
        quotas=tuple(quotas),
        locks=_lock_specs(locks, where, interface),
        rate_limits=_rate_limits(rate_limits, where, interface),
    )
    source = SourceRef(module=module_name(fn), qualname=fn.__qualname__, file=module_file(fn))
    draft = TaskSpec(
        name=task_name,
        version="",
        type=task_type,
        interface=interface,
        metadata=metadata,
        claims=claims,
        custom=custom or {},
        source=source,
    )
    version = digest(draft.model_dump(mode="json", exclude={"source"}), _source_version(fn))[:16]
    return draft.model_copy(update={"version": version})


def _rate_limits(rate_limits: Any, where: str, interface: Interface) -> tuple[RateLimit, ...]:
    if isinstance(rate_limits, RateLimit) or not all(isinstance(r, RateLimit) for r in rate_limits):
        raise DefinitionError(
            f"{where}: rate_limits must be RateLimit(...) values, got {rate_limits!r}"
        )
    for limit in rate_limits:
        problem = key_problem(limit, interface)
        if problem:  # the engine could never compute a key: refuse it now, not loop later
            raise DefinitionError(f"{where}: {problem}")
    return tuple(rate_limits)


def _check_options(
    where: str, quotas: Any, interruptible: Any, task_type: Any, custom: Any
) -> None:
    if isinstance(quotas, str | Quota) or not all(isinstance(q, Quota) for q in quotas):
        raise DefinitionError(f"{where}: quotas must be Quota(...) values, got {quotas!r}")
    if not isinstance(interruptible, bool):
        raise DefinitionError(f"{where}: interruptible must be a bool, got {interruptible!r}")
    if not isinstance(task_type, str) or not task_type:
        raise DefinitionError(f"{where}: type must be a non-empty string, got {task_type!r}")
    if custom is not None:
        if not isinstance(custom, dict):
            raise DefinitionError(f"{where}: custom must be a dict, got {custom!r}")
        try:
            canonical_json(custom)
        except (TypeError, ValueError) as exc:  # plugin config is stored as JSON
            raise DefinitionError(f"{where}: custom must be JSON (no NaN): {exc}") from None


@overload
def task(fn: Callable[P, R], /) -> TaskDef[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    retries: int = 0,
    timeout: float | None = None,
    cache: bool | Cache = False,
    quotas: Sequence[Quota] = (),
    locks: LockArg | None = None,
    interruptible: bool = False,
    type: str = "python",
    custom: dict[str, Any] | BaseModel | None = None,
    priority: int = 0,
    rate_limits: Sequence[RateLimit] = (),
) -> Callable[[Callable[P, R]], TaskDef[P, R]]: ...


def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retries: int = 0,
    timeout: float | None = None,
    cache: bool | Cache = False,
    quotas: Sequence[Quota] = (),
    locks: LockArg | None = None,
    interruptible: bool = False,
    type: str = "python",
    custom: dict[str, Any] | BaseModel | None = None,
    priority: int = 0,
    rate_limits: Sequence[RateLimit] = (),
) -> TaskDef[P, R] | Callable[[Callable[P, R]], TaskDef[P, R]]:
    """Make a task of a function (sync or async) with JSON-typed parameters and return.

    `retries` counts extra attempts after a retryable failure; `timeout` (seconds) bounds each
    attempt; `cache=Cache(version=...)` reuses outputs for equal inputs; `quotas` are tokens
    of named resources held while the task runs; `locks` are names (computed from inputs) held
    exclusively, claimed all-or-nothing together with the quotas; `rate_limits` take units of
    named rate limits' budgets (keyed by a template over the inputs) each time the task runs.
    """

    def wrap(func: Callable[P, R]) -> TaskDef[P, R]:
        spec = make_task_spec(
            func,
            name=name,
            retries=retries,
            timeout=timeout,
            cache=cache,
            quotas=quotas,
            locks=locks,
            interruptible=interruptible,
            task_type=type,
            custom=custom,
            priority=priority,
            rate_limits=rate_limits,
        )
        return TaskDef(func, spec)

    return wrap(fn) if fn is not None else wrap
