"""Repositories over one connection: executions, nodes, events, specs, launch plans and
execution concurrency caps.

Every phase change is a compare-and-swap: an UPDATE whose WHERE names the phase (or row
version) the caller last saw, returning whether it won. Use them through `Store.write()` or
`Store.read()`, which bind them to one transaction.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.errors import NotFoundError
from sluice.spec.models import LaunchPlanSpec, TaskSpec, WorkflowSpec
from sluice.spec.phases import (
    TERMINAL_EXECUTION_PHASES,
    CacheStatus,
    ExecutionPhase,
    NodePhase,
    ReservationStatus,
)
from sluice.store import schema
from sluice.store.records import EventRecord, ExecutionRecord, LaunchPlanRecord, NodeRecord
from sluice.store.servertime import now_expression
from sluice.store.sql import insert_ignore

_NON_TERMINAL = [p.value for p in ExecutionPhase if p not in TERMINAL_EXECUTION_PHASES]
_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(EventRecord) if f.name != "id")
_NODE_FIELDS = tuple(f.name for f in dataclasses.fields(NodeRecord))
_NODE_COLUMNS = tuple(name for name in _NODE_FIELDS if name not in ("execution_id", "node_id"))


def _execution(row: sa.Row[Any]) -> ExecutionRecord:
    values = dict(row._mapping)
    values["phase"] = ExecutionPhase(values["phase"])
    return ExecutionRecord(**values)


def _node(row: sa.Row[Any]) -> NodeRecord:
    values = dict(row._mapping)
    values["phase"] = NodePhase(values["phase"])
    values["cache_status"] = CacheStatus(values["cache_status"])
    values["reservation_status"] = ReservationStatus(values["reservation_status"])
    return NodeRecord(**values)


@dataclasses.dataclass(frozen=True)
class ExecutionListing:
    """What a listing of executions narrows by (every field optional): read by
    `ExecutionRepository.listing_page` and `count`."""

    phases: Collection[ExecutionPhase] | None = None
    projects: Collection[str] | None = None
    domain: str | None = None
    launch_plan: str | None = None
    launch_plan_prefix: str | None = None
    created_after: float | None = None
    created_before: float | None = None
    text: str | None = None
    """Case-insensitive: an id prefix, or part of the workflow, the launch plan or the inputs'
    JSON text."""


def _like(text: str, *, prefix: bool = False) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}%" if prefix else f"%{escaped}%"


def _listing_conditions(t: sa.Table, where: ExecutionListing) -> list[sa.ColumnElement[bool]]:
    found: list[sa.ColumnElement[bool]] = []
    if where.phases is not None:
        found.append(t.c.phase.in_([p.value for p in where.phases]))
    if where.projects is not None:
        found.append(t.c.project.in_(list(where.projects)))
    for column, value in ((t.c.domain, where.domain), (t.c.launch_plan, where.launch_plan)):
        if value is not None:
            found.append(column == value)
    if where.launch_plan_prefix:
        prefix = _like(where.launch_plan_prefix, prefix=True)
        found.append(sa.func.lower(t.c.launch_plan).like(prefix, escape="\\"))
    if where.created_after is not None:
        found.append(t.c.created_at >= where.created_after)
    if where.created_before is not None:
        found.append(t.c.created_at < where.created_before)
    if where.text:
        anywhere = _like(where.text)
        found.append(
            sa.or_(
                t.c.id.like(_like(where.text, prefix=True), escape="\\"),
                sa.func.lower(t.c.workflow_name).like(anywhere, escape="\\"),
                sa.func.lower(sa.func.coalesce(t.c.launch_plan, "")).like(anywhere, escape="\\"),
                sa.func.lower(sa.cast(t.c.inputs, sa.Text)).like(anywhere, escape="\\"),
            )
        )
    return found


class ExecutionRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.executions

    async def insert(self, record: ExecutionRecord) -> bool:
        """Insert a new execution; False if one with the same id or schedule firing exists."""
        values = dataclasses.asdict(record)
        values["phase"] = record.phase.value
        return await insert_ignore(self._conn, self._t, [values]) == 1

    async def get(self, execution_id: str) -> ExecutionRecord | None:
        row = (
            await self._conn.execute(sa.select(self._t).where(self._t.c.id == execution_id))
        ).first()
        return _execution(row) if row else None

    async def find(
        self,
        *,
        phases: Collection[ExecutionPhase] | None = None,
        project: str | None = None,
        domain: str | None = None,
        launch_plan: str | None = None,
        ids: Collection[str] | None = None,
        limit: int | None = 100,
        oldest_first: bool = False,
    ) -> list[ExecutionRecord]:
        query = sa.select(self._t)
        if phases is not None:
            query = query.where(self._t.c.phase.in_([p.value for p in phases]))
        if project is not None:
            query = query.where(self._t.c.project == project)
        if domain is not None:
            query = query.where(self._t.c.domain == domain)
        if launch_plan is not None:
            query = query.where(self._t.c.launch_plan == launch_plan)
        if ids is not None:
            query = query.where(self._t.c.id.in_(list(ids)))
        order = self._t.c.created_at if oldest_first else self._t.c.created_at.desc()
        query = query.order_by(order, self._t.c.id).limit(limit)
        return [_execution(row) for row in await self._conn.execute(query)]

    async def page(
        self,
        *,
        phases: Collection[ExecutionPhase] | None = None,
        projects: Collection[str] | None = None,
        domain: str | None = None,
        launch_plan: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 100,
    ) -> list[ExecutionRecord]:
        """Newest first, after the keyset `before` = (created_at, id) of the previous page's
        last row: pages stay stable while executions are created."""
        t = self._t
        query = sa.select(t)
        if phases is not None:
            query = query.where(t.c.phase.in_([p.value for p in phases]))
        if projects is not None:
            query = query.where(t.c.project.in_(list(projects)))
        for column, value in ((t.c.domain, domain), (t.c.launch_plan, launch_plan)):
            if value is not None:
                query = query.where(column == value)
        if created_after is not None:
            query = query.where(t.c.created_at >= created_after)
        if created_before is not None:
            query = query.where(t.c.created_at < created_before)
        if before is not None:
            at, last_id = before
            query = query.where(
                sa.or_(t.c.created_at < at, sa.and_(t.c.created_at == at, t.c.id < last_id))
            )
        query = query.order_by(t.c.created_at.desc(), t.c.id.desc()).limit(limit)
        return [_execution(row) for row in await self._conn.execute(query)]

    async def listing_page(
        self,
        where: ExecutionListing,
        *,
        older_than: tuple[float, str] | None = None,
        newer_than: tuple[float, str] | None = None,
        limit: int = 100,
    ) -> builtins.list[ExecutionRecord]:
        """Newest first. With `older_than` (created_at, id) the rows after it in that order;
        with `newer_than`, the `limit` rows just before it (still newest first): cursor pages
        both ways that stay stable while executions are created."""
        t = self._t
        query = sa.select(t).where(*_listing_conditions(t, where))
        newest_first = (t.c.created_at.desc(), t.c.id.desc())
        if older_than is not None:
            at, last = older_than
            query = query.where(
                sa.or_(t.c.created_at < at, sa.and_(t.c.created_at == at, t.c.id < last))
            )
        if newer_than is not None:
            at, first = newer_than
            query = query.where(
                sa.or_(t.c.created_at > at, sa.and_(t.c.created_at == at, t.c.id > first))
            )
            query = query.order_by(t.c.created_at, t.c.id).limit(limit)
            return [_execution(row) for row in reversed((await self._conn.execute(query)).all())]
        query = query.order_by(*newest_first).limit(limit)
        return [_execution(row) for row in await self._conn.execute(query)]

    async def count(self, where: ExecutionListing) -> int:
        """How many executions `where` selects."""
        t = self._t
        query = sa.select(sa.func.count()).select_from(t).where(*_listing_conditions(t, where))
        return int((await self._conn.execute(query)).scalar_one())

    async def ids_starting_with(
        self, prefix: str, limit: int, projects: Collection[str] | None = None
    ) -> builtins.list[str]:
        """Ids that start with `prefix` (taken literally), in order, at most `limit`; only
        executions of `projects` when given."""
        t = self._t
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = sa.select(t.c.id).where(t.c.id.like(f"{escaped}%", escape="\\"))
        if projects is not None:
            query = query.where(t.c.project.in_(list(projects)))
        query = query.order_by(t.c.id).limit(limit)
        return [row[0] for row in await self._conn.execute(query)]

    async def projects_of(self, execution_ids: Collection[str]) -> dict[str, str]:
        """The project of each of these executions that exists."""
        t = self._t
        found: dict[str, str] = {}
        ids = sorted(set(execution_ids))
        for start in range(0, len(ids), 500):  # bounded IN lists
            query = sa.select(t.c.id, t.c.project).where(t.c.id.in_(ids[start : start + 500]))
            found.update({row[0]: row[1] for row in await self._conn.execute(query)})
        return found

    async def compare_and_set_phase(
        self,
        execution_id: str,
        expected: Collection[ExecutionPhase],
        phase: ExecutionPhase,
        now: float,
        **fields: Any,
    ) -> bool:
        """Move to `phase` only if the current phase is one of `expected`."""
        values = {
            "phase": phase.value,
            "updated_at": now,
            "version": self._t.c.version + 1,
            **fields,
        }
        if phase.is_terminal:
            values.setdefault("ended_at", now)
        result = await self._conn.execute(
            sa.update(self._t)
            .where(self._t.c.id == execution_id, self._t.c.phase.in_([p.value for p in expected]))
            .values(**values)
        )
        return result.rowcount == 1

    def _now(self, now: float | None) -> Any:
        """The store's time in a statement: a lease is judged on it, never on an engine's
        clock (store/servertime.py); `now` is a test clock's."""
        return now_expression(self._conn.dialect.name, now)

    async def claim(
        self, execution_id: str, owner: str, now: float | None, lease: float
    ) -> int | None:
        """Take ownership of a non-terminal execution that nobody holds (or whose holder's
        lease lapsed on the store's clock, or that `owner` already holds) for `lease` seconds
        of the store's clock; the new ownership epoch, or None when it was not taken. Every
        claim starts a new epoch, so writes from an earlier ownership are refused (`hold`)."""
        t, at = self._t, self._now(now)
        result = await self._conn.execute(
            sa.update(t)
            .where(
                t.c.id == execution_id,
                t.c.phase.in_(_NON_TERMINAL),
                t.c.phase != ExecutionPhase.PENDING.value,
                sa.or_(t.c.owner.is_(None), t.c.owner_expires_at < at, t.c.owner == owner),
            )
            .values(owner=owner, owner_expires_at=at + lease, owner_epoch=t.c.owner_epoch + 1)
            .returning(t.c.owner_epoch)
        )
        epoch = result.scalar_one_or_none()
        return None if epoch is None else int(epoch)

    async def claimable(
        self, owner: str, now: float | None, limit: int, ids: Collection[str] | None = None
    ) -> list[str]:
        """Ids of executions `owner` could claim (unowned, lease lapsed on the store's clock,
        or its own), highest priority then oldest first, at most `limit`; only among `ids`
        when given."""
        t, at = self._t, self._now(now)
        query = (
            sa.select(t.c.id)
            .where(
                t.c.phase.in_(_NON_TERMINAL),
                t.c.phase != ExecutionPhase.PENDING.value,
                sa.or_(t.c.owner.is_(None), t.c.owner_expires_at < at, t.c.owner == owner),
            )
            .order_by(t.c.priority.desc(), t.c.created_at)
            .limit(limit)
        )
        if ids is not None:
            query = query.where(t.c.id.in_(list(ids)))
        return [row.id for row in await self._conn.execute(query)]

    async def other_owners(self, owner: str, now: float | None) -> set[str]:
        """Owners other than `owner` holding a live lease (on the store's clock) on an active
        execution."""
        t = self._t
        query = (
            sa.select(t.c.owner)
            .where(
                t.c.phase.in_(_NON_TERMINAL),
                t.c.owner.is_not(None),
                t.c.owner != owner,
                t.c.owner_expires_at >= self._now(now),
            )
            .distinct()
        )
        return {row.owner for row in await self._conn.execute(query)}

    async def release_all(self, owner: str) -> int:
        """Release every execution `owner` holds (it is known dead); how many."""
        t = self._t
        result = await self._conn.execute(
            sa.update(t).where(t.c.owner == owner).values(owner=None, owner_expires_at=None)
        )
        return int(result.rowcount or 0)

    async def hold(
        self, execution_id: str, owner: str, epoch: int, now: float | None, lease: float
    ) -> bool:
        """The fence of an owner's write, first in its transaction: extend `owner`'s lease on
        one execution to the store's time plus `lease`, only while it holds it in `epoch`;
        False (write nothing) otherwise. The row lock it takes orders the write against a
        concurrent takeover."""
        t, at = self._t, self._now(now)
        result = await self._conn.execute(
            sa.update(t)
            .where(t.c.id == execution_id, t.c.owner == owner, t.c.owner_epoch == epoch)
            .values(owner_expires_at=at + lease)
        )
        return result.rowcount == 1

    async def renew(
        self, owner: str, execution_ids: Collection[str], now: float | None, lease: float
    ) -> set[str]:
        """Extend to the store's time plus `lease` the lease on executions `owner` still
        holds; returns those it still holds."""
        if not execution_ids:
            return set()
        t = self._t
        await self._conn.execute(
            sa.update(t)
            .where(t.c.owner == owner, t.c.id.in_(list(execution_ids)))
            .values(owner_expires_at=self._now(now) + lease)
        )
        rows = await self._conn.execute(
            sa.select(t.c.id).where(t.c.owner == owner, t.c.id.in_(list(execution_ids)))
        )
        return {row.id for row in rows}

    async def release(self, execution_id: str, owner: str) -> None:
        t = self._t
        await self._conn.execute(
            sa.update(t)
            .where(t.c.id == execution_id, t.c.owner == owner)
            .values(owner=None, owner_expires_at=None)
        )

    async def last_scheduled_at(self, project: str, domain: str, launch_plan: str) -> float | None:
        """The nominal time of the latest schedule firing of a launch plan name, any version."""
        t = self._t
        query = sa.select(sa.func.max(t.c.scheduled_at)).where(
            t.c.project == project, t.c.domain == domain, t.c.launch_plan == launch_plan
        )
        value = (await self._conn.execute(query)).scalar_one()
        return None if value is None else float(value)

    async def count_active(self, project: str, domain: str, launch_plan: str) -> int:
        t = self._t
        query = sa.select(sa.func.count()).where(
            t.c.project == project,
            t.c.domain == domain,
            t.c.launch_plan == launch_plan,
            t.c.phase.in_([p.value for p in ExecutionPhase if p.is_active]),
        )
        return int((await self._conn.execute(query)).scalar_one())


class NodeRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.node_executions

    async def insert_many(self, records: Sequence[NodeRecord]) -> None:
        if records:
            await self._conn.execute(sa.insert(self._t), [self._values(r) for r in records])

    async def list(self, execution_id: str) -> list[NodeRecord]:
        query = sa.select(self._t).where(self._t.c.execution_id == execution_id)
        return [_node(row) for row in await self._conn.execute(query)]

    async def find_claiming(self) -> builtins.list[NodeRecord]:
        """Started, unfinished nodes that claim quotas or locks (for `sluice locks ls`)."""
        t = self._t
        query = (
            sa.select(t)
            .where(t.c.phase == NodePhase.RUNNING.value, t.c.claims.is_not(None))
            .order_by(t.c.started_at)
        )
        return [_node(row) for row in await self._conn.execute(query)]

    async def find_in_task_phase(self, task_phase: int) -> builtins.list[NodeRecord]:
        """Started, unfinished nodes whose plugin phase is `task_phase` (e.g. those waiting
        for a cache reservation, for `sluice reservations ls`)."""
        t = self._t
        query = sa.select(t).where(
            t.c.phase == NodePhase.RUNNING.value, t.c.task_phase == task_phase
        )
        return [_node(row) for row in await self._conn.execute(query)]

    async def get(self, execution_id: str, node_id: str) -> NodeRecord | None:
        query = sa.select(self._t).where(
            self._t.c.execution_id == execution_id, self._t.c.node_id == node_id
        )
        row = (await self._conn.execute(query)).first()
        return _node(row) if row else None

    async def update(self, record: NodeRecord) -> bool:
        """Write `record` if the stored row is still at `record.version`; bumps the version."""
        return await self.update_many([record])

    async def update_many(self, records: Sequence[NodeRecord]) -> bool:
        """Compare-and-swap each record on its version, in one statement executed for all.
        True if every row was at the expected version (then every version is bumped); False
        if any was not, and the caller must roll the transaction back."""
        if not records:
            return True
        t = self._t
        statement = (
            sa.update(t)
            .where(
                t.c.execution_id == sa.bindparam("b_execution_id"),
                t.c.node_id == sa.bindparam("b_node_id"),
                t.c.version == sa.bindparam("b_version"),
            )
            .values({column: sa.bindparam(column) for column in _NODE_COLUMNS})
        )
        rows = [
            {
                **self._values(r),
                "version": r.version + 1,
                "b_execution_id": r.execution_id,
                "b_node_id": r.node_id,
                "b_version": r.version,
            }
            for r in records
        ]
        result = await self._conn.execute(statement, rows)
        if result.rowcount != len(records):
            return False
        for record in records:
            record.version += 1
        return True

    @staticmethod
    def _values(record: NodeRecord) -> dict[str, Any]:
        values = {name: getattr(record, name) for name in _NODE_FIELDS}
        for key in ("phase", "cache_status", "reservation_status"):
            values[key] = values[key].value
        return values


class EventRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.events

    async def append(self, events: Sequence[EventRecord]) -> None:
        if events:
            rows = [{name: getattr(e, name) for name in _EVENT_FIELDS} for e in events]
            await self._conn.execute(sa.insert(self._t), rows)

    async def list(
        self, execution_id: str | None = None, after_id: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        query = (
            sa.select(self._t).where(self._t.c.id > after_id).order_by(self._t.c.id).limit(limit)
        )
        if execution_id is not None:
            query = query.where(self._t.c.execution_id == execution_id)
        return [EventRecord(**row._mapping) for row in await self._conn.execute(query)]

    async def of_node(
        self, execution_id: str, node_id: str, phase: str
    ) -> builtins.list[EventRecord]:
        """The node's events of one phase, oldest first (a gate's signals)."""
        t = self._t
        query = (
            sa.select(t)
            .where(t.c.execution_id == execution_id, t.c.node_id == node_id, t.c.phase == phase)
            .order_by(t.c.id)
        )
        return [EventRecord(**row._mapping) for row in await self._conn.execute(query)]


class SpecRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def put_workflow(self, project: str, domain: str, spec: WorkflowSpec, now: float) -> None:
        """Register a workflow closure and its tasks; specs are immutable, so re-registering
        the same name and version is a no-op."""
        tasks = [self._row(project, domain, t.name, t.version, t, now) for t in spec.tasks.values()]
        await insert_ignore(self._conn, schema.task_specs, tasks)
        row = self._row(project, domain, spec.name, spec.version, spec, now)
        await insert_ignore(self._conn, schema.workflow_specs, [row])

    async def get_workflow(
        self, project: str, domain: str, name: str, version: str
    ) -> WorkflowSpec | None:
        t = schema.workflow_specs
        row = (
            await self._conn.execute(
                sa.select(t.c.spec).where(
                    t.c.project == project,
                    t.c.domain == domain,
                    t.c.name == name,
                    t.c.version == version,
                )
            )
        ).first()
        return WorkflowSpec.model_validate(row.spec) if row else None

    async def get_task(self, project: str, domain: str, name: str, version: str) -> TaskSpec | None:
        t = schema.task_specs
        row = (
            await self._conn.execute(
                sa.select(t.c.spec).where(
                    t.c.project == project,
                    t.c.domain == domain,
                    t.c.name == name,
                    t.c.version == version,
                )
            )
        ).first()
        return TaskSpec.model_validate(row.spec) if row else None

    async def catalogue(
        self, project: str, domain: str, *, tasks: bool = False
    ) -> builtins.list[tuple[str, str, float]]:
        """(name, version, registered at) of every workflow (or task) of project/domain,
        by name, newest version first."""
        t = schema.task_specs if tasks else schema.workflow_specs
        query = (
            sa.select(t.c.name, t.c.version, t.c.created_at)
            .where(t.c.project == project, t.c.domain == domain)
            .order_by(t.c.name, t.c.created_at.desc(), t.c.version)
        )
        return [(r.name, r.version, r.created_at) for r in await self._conn.execute(query)]

    @staticmethod
    def _row(
        project: str, domain: str, name: str, version: str, spec: Any, now: float
    ) -> dict[str, Any]:
        return {
            "project": project,
            "domain": domain,
            "name": name,
            "version": version,
            "spec": spec.model_dump(mode="json"),
            "created_at": now,
        }


class LaunchPlanRepository:
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.launch_plans

    async def put(self, project: str, domain: str, spec: LaunchPlanSpec, now: float) -> bool:
        """Register a version (INACTIVE); False if that version exists already."""
        row = {
            "project": project,
            "domain": domain,
            "name": spec.name,
            "version": spec.version,
            "workflow": spec.workflow,
            "spec": spec.model_dump(mode="json"),
            "state": self.INACTIVE,
            "created_at": now,
            "updated_at": now,
        }
        return await insert_ignore(self._conn, self._t, [row]) == 1

    async def get(
        self, project: str, domain: str, name: str, version: str
    ) -> LaunchPlanRecord | None:
        t = self._t
        row = (
            await self._conn.execute(
                sa.select(t).where(
                    t.c.project == project,
                    t.c.domain == domain,
                    t.c.name == name,
                    t.c.version == version,
                )
            )
        ).first()
        return LaunchPlanRecord(**row._mapping) if row else None

    async def active(self, project: str, domain: str, name: str) -> LaunchPlanRecord | None:
        t = self._t
        row = (
            await self._conn.execute(
                sa.select(t).where(
                    t.c.project == project,
                    t.c.domain == domain,
                    t.c.name == name,
                    t.c.state == self.ACTIVE,
                )
            )
        ).first()
        return LaunchPlanRecord(**row._mapping) if row else None

    async def find(
        self,
        project: str | None = None,
        domain: str | None = None,
        name: str | None = None,
        active_only: bool = False,
    ) -> list[LaunchPlanRecord]:
        t = self._t
        query = sa.select(t).order_by(t.c.project, t.c.domain, t.c.name, t.c.created_at)
        for column, value in ((t.c.project, project), (t.c.domain, domain), (t.c.name, name)):
            if value is not None:
                query = query.where(column == value)
        if active_only:
            query = query.where(t.c.state == self.ACTIVE)
        return [LaunchPlanRecord(**row._mapping) for row in await self._conn.execute(query)]

    async def set_active(
        self, project: str, domain: str, name: str, version: str | None, now: float
    ) -> None:
        """Make `version` the one ACTIVE version (None deactivates all), in this transaction.
        An unknown version raises NotFoundError naming it, before anything changes."""
        t = self._t
        key = (t.c.project == project, t.c.domain == domain, t.c.name == name)
        if version is not None and await self.get(project, domain, name, version) is None:
            known = [r.version for r in await self.find(project, domain, name)]
            raise NotFoundError(
                f"launch plan {name!r} has no version {version!r} in {project}/{domain}; "
                f"versions are {known}"
            )
        await self._conn.execute(
            sa.update(t)
            .where(*key, t.c.state == self.ACTIVE)
            .values(state=self.INACTIVE, updated_at=now)
        )
        if version is not None:
            await self._conn.execute(
                sa.update(t)
                .where(*key, t.c.version == version)
                .values(state=self.ACTIVE, updated_at=now)
            )

    async def changed_since(self, since: float) -> list[LaunchPlanRecord]:
        t = self._t
        query = sa.select(t).where(t.c.updated_at > since).order_by(t.c.updated_at)
        return [LaunchPlanRecord(**row._mapping) for row in await self._conn.execute(query)]


class CapsRepository:
    """Caps on active executions per project (domain "") and per project/domain. Config and
    operator values are separate columns; the effective cap is operator ?? config."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.concurrency_caps

    async def effective(self) -> dict[tuple[str, str], int]:
        """Every cap in force, keyed by (project, domain) with domain "" for a project cap."""
        t = self._t
        value = sa.func.coalesce(t.c.operator_max, t.c.config_max)
        rows = await self._conn.execute(sa.select(t.c.project, t.c.domain, value.label("cap")))
        return {(r.project, r.domain): int(r.cap) for r in rows if r.cap is not None}

    async def applies(self, project: str, domain: str) -> bool:
        """Whether a cap governs executions of `project`/`domain`."""
        t = self._t
        query = sa.select(sa.func.count()).where(
            t.c.project == project,
            t.c.domain.in_(["", domain]),
            sa.or_(t.c.operator_max.is_not(None), t.c.config_max.is_not(None)),
        )
        return int((await self._conn.execute(query)).scalar_one()) > 0

    async def rows(self) -> list[dict[str, Any]]:
        t = self._t
        query = sa.select(t).order_by(t.c.project, t.c.domain)
        return [dict(row._mapping) for row in await self._conn.execute(query)]

    async def set_value(
        self, column: str, project: str, domain: str, value: int | None, now: float
    ) -> None:
        """Set the `config_max` or `operator_max` of one scope (None clears it); a row left
        with neither is deleted."""
        t = self._t
        row = {"project": project, "domain": domain, "updated_at": now}
        await insert_ignore(self._conn, t, [{**row, "config_max": None, "operator_max": None}])
        key = (t.c.project == project, t.c.domain == domain)
        await self._conn.execute(
            sa.update(t).where(*key).values({column: value, "updated_at": now})
        )
        await self._conn.execute(
            sa.delete(t).where(*key, t.c.config_max.is_(None), t.c.operator_max.is_(None))
        )
