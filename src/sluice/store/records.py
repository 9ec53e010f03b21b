"""Rows as typed records: what repositories take and return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice.spec.phases import CacheStatus, ExecutionPhase, NodePhase, ReservationStatus


@dataclass
class ExecutionRecord:
    id: str
    project: str
    domain: str
    workflow_name: str
    workflow_version: str
    phase: ExecutionPhase
    inputs: dict[str, Any]
    created_at: float
    updated_at: float
    launch_plan: str | None = None
    launch_plan_version: str | None = None
    reason: str = ""
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    scheduled_at: float | None = None
    owner: str | None = None
    owner_expires_at: float | None = None
    owner_epoch: int = 0
    """Bumped by every claim: the fencing token of the owner's writes (migration 0007)."""
    version: int = 0
    concurrency_key: str | None = None
    backfill_id: str | None = None
    slot_generation: int = 0

    @property
    def workflow_key(self) -> str:
        return f"{self.workflow_name}@{self.workflow_version}"


@dataclass
class NodeRecord:
    execution_id: str
    node_id: str
    phase: NodePhase = NodePhase.NOT_STARTED
    task_phase: int = 0
    phase_version: int = 0
    reason: str = ""
    attempt: int = 0
    system_failures: int = 0
    plugin_state: dict[str, Any] | None = None
    plugin_state_version: int = 0
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cache_status: CacheStatus = CacheStatus.DISABLED
    reservation_status: ReservationStatus = ReservationStatus.DISABLED
    claims: dict[str, Any] | None = None
    started_at: float | None = None
    attempt_started_at: float | None = None
    next_attempt_at: float | None = None
    updated_at: float = 0.0
    ended_at: float | None = None
    version: int = 0


@dataclass(frozen=True)
class EventRecord:
    execution_id: str
    phase: str
    occurred_at: float
    node_id: str = ""
    attempt: int = 0
    phase_version: int = 0
    reason: str = ""
    info: dict[str, Any] | None = None
    id: int | None = None


@dataclass(frozen=True)
class LaunchPlanRecord:
    project: str
    domain: str
    name: str
    version: str
    workflow: str
    spec: dict[str, Any]
    state: str
    created_at: float
    updated_at: float
