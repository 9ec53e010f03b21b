"""Rate limit keys computed from a task's inputs with the lock names' templating (names.py):
`RateLimit("openai", key="{customer}")` takes from the budget of `openai/<customer>`.

`key_problem` refuses, when a task is defined, a template that could never be filled (a field
that is not an input); `rate_claims` fills them when the node starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import DefinitionError
from sluice.locks.names import template_fields
from sluice.spec.models import Interface, RateLimit, TaskSpec
from sluice.spec.names import LOCK_NAME_MAX, rate_limit_key_problem

RateKey = tuple[str, str, int]
"""(limit name, key, units) of one claim."""


def key_problem(limit: RateLimit, interface: Interface) -> str:
    """Why this key template can never give a key for inputs of `interface`, or ""."""
    template = limit.key
    where = f"rate limit {limit.name!r}: key template {template!r}"
    if len(template) > LOCK_NAME_MAX:
        return f"{where} is longer than {LOCK_NAME_MAX} characters"
    if template and not template.isprintable():
        return f"{where} contains control characters"
    try:
        fields = template_fields(template)
    except ValueError as exc:
        return f"{where} is malformed: {exc}"
    for field in fields:
        if field not in interface.inputs:
            return (
                f"{where}: field {field!r} is not an input; inputs are {sorted(interface.inputs)}"
            )
    return ""


def rate_claims(task: TaskSpec, inputs: Mapping[str, Any]) -> list[RateKey]:
    """The (name, key, units) the task takes with these inputs, one per distinct key;
    DefinitionError names a template that does not fill."""
    found: dict[tuple[str, str], int] = {}
    for limit in task.claims.rate_limits:
        key = _fill(limit, task, inputs)
        found[(limit.name, key)] = found.get((limit.name, key), 0) + limit.units
    return [(name, key, units) for (name, key), units in found.items()]


def _fill(limit: RateLimit, task: TaskSpec, inputs: Mapping[str, Any]) -> str:
    where = f"task {task.name!r} rate limit {limit.name!r}"
    try:
        key = limit.key.format_map(dict(inputs))
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
        raise DefinitionError(
            f"{where}: key template {limit.key!r} cannot be filled: {exc!r}"
        ) from None
    problem = rate_limit_key_problem(key)
    if problem:
        raise DefinitionError(f"{where}: key template {limit.key!r} gives a bad key: {problem}")
    return key
