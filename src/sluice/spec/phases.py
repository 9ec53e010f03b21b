"""Phases of executions and nodes, and the cache and reservation statuses a node reports."""

from __future__ import annotations

import enum


class ExecutionPhase(enum.StrEnum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDING = "SUCCEEDING"
    SUCCEEDED = "SUCCEEDED"
    FAILING = "FAILING"
    FAILED = "FAILED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    TIMED_OUT = "TIMED_OUT"
    SKIPPED = "SKIPPED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_EXECUTION_PHASES

    @property
    def is_active(self) -> bool:
        """Counts against concurrency limits: every non-terminal phase after PENDING."""
        return self in ACTIVE_EXECUTION_PHASES


TERMINAL_EXECUTION_PHASES = frozenset(
    {
        ExecutionPhase.SUCCEEDED,
        ExecutionPhase.FAILED,
        ExecutionPhase.ABORTED,
        ExecutionPhase.TIMED_OUT,
        ExecutionPhase.SKIPPED,
    }
)
ACTIVE_EXECUTION_PHASES = frozenset(
    {
        ExecutionPhase.QUEUED,
        ExecutionPhase.RUNNING,
        ExecutionPhase.SUCCEEDING,
        ExecutionPhase.FAILING,
        ExecutionPhase.ABORTING,
    }
)


class NodePhase(enum.StrEnum):
    NOT_STARTED = "NOT_STARTED"
    RUNNING = "RUNNING"
    """Started: the task phase says whether it waits, is queued, runs or backs off."""
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"
    SKIPPED = "SKIPPED"
    """Never ran: an upstream node failed or the execution was aborted first."""

    @property
    def is_terminal(self) -> bool:
        return self not in (NodePhase.NOT_STARTED, NodePhase.RUNNING)


class CacheStatus(enum.StrEnum):
    DISABLED = "DISABLED"
    MISS = "MISS"
    HIT = "HIT"
    POPULATED = "POPULATED"
    LOOKUP_FAILURE = "LOOKUP_FAILURE"
    PUT_FAILURE = "PUT_FAILURE"
    SKIPPED = "SKIPPED"


class ReservationStatus(enum.StrEnum):
    DISABLED = "DISABLED"
    ACQUIRED = "ACQUIRED"
    EXISTS = "EXISTS"
    RELEASED = "RELEASED"
    FAILURE = "FAILURE"
