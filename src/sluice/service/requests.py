"""What a caller brings to the service: its scope (an API token's projects and rights) and a
run request checked before any store is opened."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice.executions.idempotency import check_key
from sluice.executions.launch import merge_inputs
from sluice.runtime import resolve_target
from sluice.service.inputs import Inputs, resolve_inputs


@dataclass(frozen=True)
class Scope:
    """What a caller may see and do: some projects (None: all) and whether it may write."""

    projects: frozenset[str] | None = None
    read_only: bool = False
    who: str = ""
    """Who the caller is, for the audit trail: `token ci (1a2b...)`, `a local user`; "" for
    the process's own caller (the CLI)."""

    def sees(self, project: str) -> bool:
        return self.projects is None or project in self.projects


@dataclass(frozen=True)
class RunRequest:
    """A target and its inputs, checked before any store is opened."""

    target: Any
    values: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    """A retried run with the same key drives the execution the first one created."""

    @classmethod
    def of(
        cls,
        target: Any,
        inputs: Inputs,
        options: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RunRequest:
        workflow, launch_plan = resolve_target(target)
        values = resolve_inputs(workflow, inputs)
        merge_inputs(workflow, values, launch_plan)  # every input error, before the store opens
        if idempotency_key is not None:
            check_key(idempotency_key)
        return cls(target, values, dict(options or {}), idempotency_key)
