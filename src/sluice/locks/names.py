"""Lock templates read without running anything: which inputs a template needs, whether it
can ever be filled, and the names it gives for known inputs.

The engine computes lock names when a node starts (`lock_names`, called by the task handler
and the claims gate); the checks refuse, when a task is defined or launched, a template that
could never give a name there. Capacities come from `resources.lock_rules` globs.
"""

from __future__ import annotations

import fnmatch
import string
from collections.abc import Callable, Mapping
from typing import Any

from sluice.errors import DefinitionError, NotFoundError
from sluice.modules import load_module, resolve_attribute
from sluice.spec.models import Interface, LockSpec, TaskSpec
from sluice.spec.names import LOCK_NAME_MAX, lock_name_problem

ITEM = "item"


def template_fields(template: str) -> list[str]:
    """The root names a template reads (`a` for `{a.b}` or `{a[0]}`), in order.

    Raises ValueError for a malformed template or a positional field (`{}`, `{0}`)."""
    fields: list[str] = []
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise ValueError(f"positional field {{{field}}}: name an input instead")
        fields.append(root)
        if spec and "{" in spec:
            fields.extend(template_fields(spec))
    return fields


def template_problem(spec: LockSpec, interface: Interface) -> str:
    """Why this template can never give a lock name for inputs of `interface`, or ""."""
    template = spec.template
    if not template.strip():
        return "a lock template must not be empty"
    if len(template) > LOCK_NAME_MAX:
        return f"a lock template must be at most {LOCK_NAME_MAX} characters"
    if not template.isprintable():
        return f"lock template {template!r} contains control characters"
    if spec.for_each and not _is_list(interface, spec.for_each):
        declared = interface.inputs.get(spec.for_each)
        if declared is None:
            known = sorted(interface.inputs)
            return f"for_each {spec.for_each!r} is not an input; inputs are {known}"
        return f"for_each input {spec.for_each!r} must be a list, it is {declared.type}"
    try:
        fields = template_fields(template)
    except ValueError as exc:
        return f"lock template {template!r} is malformed: {exc}"
    for field in fields:
        if field in interface.inputs or (field == ITEM and spec.for_each):
            continue
        if field == ITEM:
            return f"lock template {template!r}: field 'item' needs for_each (the list input)"
        return (
            f"lock template {template!r}: field {field!r} is not an input; "
            f"inputs are {sorted(interface.inputs)}"
        )
    return ""


def _is_list(interface: Interface, name: str) -> bool:
    declared = interface.inputs.get(name)
    return declared is not None and declared.type.kind == "list"


def fill_template(spec: LockSpec, inputs: Mapping[str, Any]) -> list[str]:
    """The lock names of a template for these inputs (as engine/claims.py computes them).

    Raises ValueError naming what does not fit."""
    values = dict(inputs)
    try:
        if not spec.for_each:
            names = [spec.template.format_map(values)]
        else:
            items = inputs[spec.for_each]
            if not isinstance(items, list):
                raise ValueError(f"for_each input {spec.for_each!r} is not a list, got {items!r}")
            names = [spec.template.format_map({**values, ITEM: item}) for item in items]
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"lock template {spec.template!r} cannot be filled: {exc!r}") from None
    for name in names:
        problem = lock_name_problem(name)
        if problem:
            raise ValueError(f"lock template {spec.template!r} gives a bad name: {problem}")
    return names


def capacity_of(rules: Mapping[str, int], name: str) -> tuple[str | None, int]:
    """The first matching `resources.lock_rules` glob and its capacity, or (None, 1)."""
    for pattern, capacity in rules.items():
        if fnmatch.fnmatchcase(name, pattern):
            return pattern, capacity
    return None, 1


def lock_capacity(rules: Mapping[str, int]) -> Callable[[str], int]:
    """Capacity of a lock name: the first glob rule (config order) that matches, else 1."""
    frozen = dict(rules)
    return lambda name: capacity_of(frozen, name)[1]


def lock_names(task: TaskSpec, inputs: Mapping[str, Any]) -> frozenset[str]:
    """The lock names a task needs with these inputs; DefinitionError names the bad spec."""
    names: set[str] = set()
    for spec in task.claims.locks:
        names.update(_names_of(spec, task, inputs))
    if any(not isinstance(n, str) or not n for n in names):
        raise DefinitionError(f"task {task.name!r}: lock names must be non-empty strings")
    return frozenset(names)


def _names_of(spec: LockSpec, task: TaskSpec, inputs: Mapping[str, Any]) -> list[str]:
    where = f"task {task.name!r} locks"
    if spec.function:
        return _call_lock_function(spec.function, task, inputs, where)
    values = dict(inputs)
    try:
        if not spec.for_each:
            return [spec.template.format_map(values)]
        items = inputs[spec.for_each]
        if not isinstance(items, list):
            raise DefinitionError(f"{where}: for_each input {spec.for_each!r} is not a list")
        return [spec.template.format_map({**values, "item": item}) for item in items]
    except (KeyError, IndexError, ValueError) as exc:
        fields = [f for _, f, _, _ in string.Formatter().parse(spec.template) if f]
        raise DefinitionError(
            f"{where}: template {spec.template!r} (fields {fields}) cannot be filled: {exc!r}"
        ) from None


def _call_lock_function(
    ref: str, task: TaskSpec, inputs: Mapping[str, Any], where: str
) -> list[str]:
    module, _, qualname = ref.partition(":")
    source = task.source
    file = source.file if source is not None and source.module == module else ""
    try:
        function = resolve_attribute(load_module(module, file), qualname)
        names = list(function(dict(inputs)))
    except NotFoundError as exc:
        raise DefinitionError(f"{where}: {exc}") from None
    except Exception as exc:
        raise DefinitionError(f"{where}: {ref} raised {exc!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise DefinitionError(f"{where}: {ref} must return lock names (str), got {names!r}")
    return names
