"""What the backfill verbs return: one backfill with its progress."""

from __future__ import annotations

from datetime import UTC, datetime

from sluice.service.models import View
from sluice.spec.phases import TERMINAL_EXECUTION_PHASES
from sluice.store.backfills import BackfillRecord

_TERMINAL = {p.value for p in TERMINAL_EXECUTION_PHASES}


class Backfill(View):
    id: str
    project: str
    domain: str
    launch_plan: str
    launch_plan_version: str
    start: datetime
    end: datetime
    reprocess: str
    max_active: int
    """The most unfinished executions the backfill keeps at once."""
    state: str
    """RUNNING, PAUSED, CANCELLED or DONE."""
    reason: str = ""
    slots: int
    """Schedule slots it runs (those the reprocess rule chose)."""
    progress: dict[str, int]
    """Slots by the phase of their execution; PLANNED: not created yet."""
    ended: int
    """Slots whose execution has ended (any terminal phase)."""
    created_at: datetime
    updated_at: datetime


def backfill_view(record: BackfillRecord, progress: dict[str, int]) -> Backfill:
    return Backfill(
        id=record.id,
        project=record.project,
        domain=record.domain,
        launch_plan=record.launch_plan,
        launch_plan_version=record.launch_plan_version,
        start=at(record.start_at),
        end=at(record.end_at),
        reprocess=record.reprocess,
        max_active=record.max_active,
        state=record.state,
        reason=record.reason,
        slots=record.slots,
        progress={k: progress[k] for k in sorted(progress)},
        ended=sum(n for phase, n in progress.items() if phase in _TERMINAL),
        created_at=at(record.created_at),
        updated_at=at(record.updated_at),
    )


def at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)
