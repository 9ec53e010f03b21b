"""Records for tests that build engine or store state by hand."""

from __future__ import annotations

from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord

NOW = 1_700_000_000.0


def running_execution(execution_id: str = "ex1", at: float = NOW) -> ExecutionRecord:
    """A RUNNING execution of workflow `w` version `1` in project `p`, domain `d`."""
    return ExecutionRecord(
        id=execution_id,
        project="p",
        domain="d",
        workflow_name="w",
        workflow_version="1",
        phase=ExecutionPhase.RUNNING,
        inputs={},
        created_at=at,
        updated_at=at,
    )
