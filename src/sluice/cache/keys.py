"""Cache keys: which computations are "the same" and may share outputs.

Recipe: sha256 (hex) of the canonical JSON list

    [KEY_SCHEME, project, domain, task name, cache version, interface, inputs]

where `interface` is the input and output types of the task (not their defaults, which the
engine has already applied to the inputs) and `inputs` are the task's inputs minus its
ignored inputs, each normalised by its declared type first, so `1` and `1.0` for a float
input, or two spellings of one datetime, give one key. A file or directory reference that
carries its content's hash (flytekit's `HashMethod` on the output that made it) is keyed by
that hash alone, not by its path: a new path with the same content hits. The task version is
left out on purpose: the cache version is the user's knob for invalidating results, as in
Flyte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import InputError
from sluice.spec.canonical import digest
from sluice.spec.models import Interface, TaskSpec
from sluice.spec.types import TypeSpec, validate_json

KEY_SCHEME = "sluice.cache.v1"
"""Bumped whenever the recipe changes, so old entries become misses instead of wrong hits."""


def cache_key(project: str, domain: str, task: TaskSpec, inputs: Mapping[str, Any]) -> str:
    """The cache key of running `task` in project/domain on `inputs` (64 hex characters).

    Raises InputError if an input does not match its declared type or is not JSON.
    """
    cache = task.metadata.cache
    kept = _normalised_inputs(task, inputs, set(cache.ignored_inputs))
    try:
        return digest(
            KEY_SCHEME, project, domain, task.name, cache.version, _signature(task.interface), kept
        )
    except (TypeError, ValueError) as exc:
        raise InputError(f"task {task.name!r}: inputs are not JSON: {exc}") from None


def _normalised_inputs(
    task: TaskSpec, inputs: Mapping[str, Any], ignored: set[str]
) -> dict[str, Any]:
    declared = task.interface.inputs
    return {
        name: _by_hash(
            declared[name].type,
            validate_json(declared[name].type, value, f"task {task.name!r} input {name!r}"),
        )
        if name in declared
        else value
        for name, value in inputs.items()
        if name not in ignored
    }


def _by_hash(spec: TypeSpec, value: Any) -> Any:
    """A normalised value with each hashed file or directory reference as its hash alone."""
    if value is None:
        return None
    if spec.kind in ("file", "directory"):
        return {"hash": value["hash"]} if "hash" in value else value
    if spec.kind == "optional":
        return _by_hash(spec.args[0], value)
    if spec.kind == "list":
        return [_by_hash(spec.args[0], item) for item in value]
    if spec.kind == "dict":
        return {k: _by_hash(spec.args[0], v) for k, v in value.items()}
    return value


def _signature(interface: Interface) -> dict[str, Any]:
    # exclude_defaults keeps keys stable if TypeSpec grows a field with a default.
    return {
        "inputs": {
            name: spec.type.model_dump(mode="json", exclude_defaults=True)
            for name, spec in interface.inputs.items()
        },
        "outputs": {
            name: spec.model_dump(mode="json", exclude_defaults=True)
            for name, spec in interface.outputs.items()
        },
    }
