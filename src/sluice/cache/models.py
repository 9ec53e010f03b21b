"""Value types of the task cache: entries, reservations, and what the CLI lists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.errors import InputError, OutputsError
from sluice.spec.canonical import canonical_json
from sluice.spec.models import TaskSpec
from sluice.spec.types import validate_json


@dataclass(frozen=True)
class CacheSource:
    """The node execution whose outputs an entry holds."""

    execution_id: str = ""
    node_id: str = ""


@dataclass(frozen=True)
class CacheEntry:
    """Cached outputs of one task for one cache key.

    `created_at` (seconds since the epoch) is stamped by `Catalog.put` from the catalog's clock
    authority; a value given by the caller is replaced. Max age is measured from it.
    """

    outputs: dict[str, Any]
    task_name: str
    cache_version: str
    source: CacheSource = field(default_factory=CacheSource)
    created_at: float = 0.0

    @classmethod
    def from_outputs(
        cls, task: TaskSpec, outputs: Mapping[str, Any], *, source: CacheSource | None = None
    ) -> CacheEntry:
        """An entry for `task`'s outputs, checked against its interface (OutputsError if not)."""
        return cls(
            outputs=checked_outputs(task, outputs),
            task_name=task.name,
            cache_version=task.metadata.cache.version,
            source=source or CacheSource(),
        )


@dataclass(frozen=True)
class EntryInfo:
    """One cache entry as `sluice cache ls` shows it: everything but the outputs."""

    key: str
    task_name: str
    cache_version: str
    created_at: float
    source: CacheSource


@dataclass(frozen=True)
class Reservation:
    """Who may compute a cache key now, and until when unless they extend it.

    `heartbeat_interval` is the clamped interval (seconds) the holder should extend at;
    `expires_at` (seconds since the epoch) is when anyone else may take the reservation over.
    """

    key: str
    owner_id: str
    heartbeat_interval: float
    expires_at: float

    @property
    def owner(self) -> str:
        """The owner as users see it, "execution/node": `owner_id` without the ownership
        epoch ("@<n>") the engine names it with."""
        base, sep, epoch = self.owner_id.rpartition("@")
        return base if sep and epoch.isdigit() else self.owner_id


@dataclass(frozen=True)
class ReservationInfo:
    """One reservation as `sluice reservations ls` shows it; `expires_in` < 0 once expired."""

    reservation: Reservation
    expires_in: float


def require_json(outputs: Any, task_name: str) -> None:
    """Raise OutputsError unless `outputs` is a dict of names to JSON values."""
    if not isinstance(outputs, dict) or not all(isinstance(name, str) for name in outputs):
        raise OutputsError(f"task {task_name!r}: outputs must be a dict of names, got {outputs!r}")
    try:
        canonical_json(outputs)
    except (TypeError, ValueError) as exc:
        raise OutputsError(f"task {task_name!r}: outputs are not JSON: {exc}") from None


def checked_outputs(task: TaskSpec, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """`outputs` checked against the task's interface and normalised (ints to floats, ISO
    dates); OutputsError names the first output that is missing, unknown or mistyped."""
    if not isinstance(outputs, Mapping):
        raise OutputsError(f"task {task.name!r}: outputs must be a mapping, got {outputs!r}")
    declared = task.interface.outputs
    missing, unknown = sorted(set(declared) - set(outputs)), sorted(set(outputs) - set(declared))
    if missing or unknown:
        raise OutputsError(
            f"task {task.name!r}: outputs do not match the interface "
            f"(missing: {missing or 'none'}; not declared: {unknown or 'none'})"
        )
    try:
        checked = {
            name: validate_json(spec, outputs[name], f"task {task.name!r} output {name!r}")
            for name, spec in declared.items()
        }
    except InputError as exc:
        raise OutputsError(str(exc)) from None
    require_json(checked, task.name)
    return checked
