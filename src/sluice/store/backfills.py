"""Backfills and their slots over one connection.

A slot's execution is the execution whose id the slot names (planned, deterministic); a slot
whose execution does not exist yet is "planned". Counts and caps join slots to executions, so
they hold whichever process (or which backfill sharing a slot's id) created the execution.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.spec.phases import TERMINAL_EXECUTION_PHASES
from sluice.store import schema
from sluice.store.sql import insert_ignore

_b, _s, _e = schema.backfills, schema.backfill_slots, schema.executions
_TERMINAL = [p.value for p in TERMINAL_EXECUTION_PHASES]
_CHUNK = 500
PLANNED = "PLANNED"
"""The progress count of slots whose execution is not created yet."""


@dataclass
class BackfillRecord:
    id: str
    project: str
    domain: str
    launch_plan: str
    launch_plan_version: str
    start_at: float
    end_at: float
    reprocess: str
    max_active: int
    state: str
    slots: int
    created_at: float
    updated_at: float
    reason: str = ""


@dataclass(frozen=True)
class SlotRecord:
    backfill_id: str
    slot_at: float
    generation: int
    execution_id: str


@dataclass(frozen=True)
class SlotRun:
    """An execution that exists for a schedule slot of a launch plan."""

    slot_at: float
    generation: int
    phase: str


class BackfillRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def insert(self, record: BackfillRecord, slots: list[SlotRecord]) -> None:
        await self._conn.execute(sa.insert(_b).values(asdict(record)))
        await insert_ignore(self._conn, _s, [asdict(s) for s in slots])

    async def get(self, backfill_id: str) -> BackfillRecord | None:
        row = (await self._conn.execute(sa.select(_b).where(_b.c.id == backfill_id))).first()
        return BackfillRecord(**row._mapping) if row else None

    async def find(
        self,
        *,
        projects: list[str] | None = None,
        states: list[str] | None = None,
        limit: int | None = 100,
    ) -> list[BackfillRecord]:
        query = sa.select(_b).order_by(_b.c.created_at.desc(), _b.c.id).limit(limit)
        if projects is not None:
            query = query.where(_b.c.project.in_(projects))
        if states is not None:
            query = query.where(_b.c.state.in_(states))
        return [BackfillRecord(**row._mapping) for row in await self._conn.execute(query)]

    async def set_state(
        self, backfill_id: str, expected: list[str], state: str, now: float, reason: str = ""
    ) -> bool:
        """Move to `state` only from one of `expected` (a compare-and-swap)."""
        result = await self._conn.execute(
            sa.update(_b)
            .where(_b.c.id == backfill_id, _b.c.state.in_(expected))
            .values(state=state, updated_at=now, reason=reason)
        )
        return result.rowcount == 1

    async def lock_running(self, backfill_id: str, now: float) -> bool:
        """True if the backfill is RUNNING; its row is then held until this transaction ends,
        so a pause, a cancel or another runner's step waits for it (PostgreSQL) or comes
        after it (SQLite's one writer)."""
        return await self.set_state(backfill_id, ["RUNNING"], "RUNNING", now)

    async def unfinished(self, backfill_id: str) -> list[str]:
        """Ids of the backfill's slot executions that exist and have not ended."""
        query = (
            sa.select(_e.c.id)
            .select_from(_s.join(_e, _e.c.id == _s.c.execution_id))
            .where(_s.c.backfill_id == backfill_id, _e.c.phase.not_in(_TERMINAL))
        )
        return [row.id for row in await self._conn.execute(query)]

    async def planned(self, backfill_id: str, limit: int) -> list[SlotRecord]:
        """The earliest slots whose execution does not exist yet, at most `limit`."""
        query = (
            sa.select(_s)
            .select_from(_s.outerjoin(_e, _e.c.id == _s.c.execution_id))
            .where(_s.c.backfill_id == backfill_id, _e.c.id.is_(None))
            .order_by(_s.c.slot_at)
            .limit(limit)
        )
        return [SlotRecord(**row._mapping) for row in await self._conn.execute(query)]

    async def repoint(self, slot: SlotRecord, execution_id: str) -> None:
        """The slot's run exists under another id (a schedule firing of the same slot)."""
        await self._conn.execute(
            sa.update(_s)
            .where(_s.c.backfill_id == slot.backfill_id, _s.c.slot_at == slot.slot_at)
            .values(execution_id=execution_id)
        )

    async def progress(self, backfill_id: str) -> dict[str, int]:
        """Slots by the phase of their execution; PLANNED for those not created yet."""
        phase = sa.func.coalesce(_e.c.phase, PLANNED).label("phase")
        query = (
            sa.select(phase, sa.func.count().label("n"))
            .select_from(_s.outerjoin(_e, _e.c.id == _s.c.execution_id))
            .where(_s.c.backfill_id == backfill_id)
            .group_by(phase)
        )
        return {row.phase: int(row.n) for row in await self._conn.execute(query)}

    async def runs(
        self, project: str, domain: str, launch_plan: str, slots: list[float]
    ) -> list[SlotRun]:
        """Every execution of these schedule slots of a launch plan (every generation)."""
        found: list[SlotRun] = []
        for start in range(0, len(slots), _CHUNK):
            query = sa.select(_e.c.scheduled_at, _e.c.slot_generation, _e.c.phase).where(
                _e.c.project == project,
                _e.c.domain == domain,
                _e.c.launch_plan == launch_plan,
                _e.c.scheduled_at.in_(slots[start : start + _CHUNK]),
            )
            found += [SlotRun(*row) for row in await self._conn.execute(query)]
        return found

    async def firing(
        self, project: str, domain: str, launch_plan: str, slot_at: float, generation: int
    ) -> str | None:
        """The id of the execution of one slot and generation, if one exists."""
        query = sa.select(_e.c.id).where(
            _e.c.project == project,
            _e.c.domain == domain,
            _e.c.launch_plan == launch_plan,
            _e.c.scheduled_at == slot_at,
            _e.c.slot_generation == generation,
        )
        return (await self._conn.execute(query)).scalar()
