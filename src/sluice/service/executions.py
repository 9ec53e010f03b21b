"""Reading executions: pages with filters and queue positions, one execution with its nodes,
attempts and events, an id from a unique prefix."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sluice.concurrency.repository import ConcurrencyRepository
from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.executions.policies import is_keyed
from sluice.logs import index as log_index
from sluice.service import convert
from sluice.service import models as m
from sluice.spec.compound import ShownNode, node_order
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import EventRecord, ExecutionRecord
from sluice.store.repositories import ExecutionListing
from sluice.store.store import Repos

MATCHES_SHOWN = 10
"""Ids an ambiguous prefix error lists."""


@dataclass(frozen=True)
class ExecutionFilter:
    """What `executions ls` and `GET /api/v1/executions` narrow a listing by."""

    phases: Collection[ExecutionPhase] | None = None
    projects: Collection[str] | None = None
    domain: str | None = None
    launch_plan: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    launch_plan_prefix: str | None = None
    text: str | None = None
    """An id prefix, or part of the workflow's or launch plan's name or of the inputs."""

    def listing(self) -> ExecutionListing:
        return ExecutionListing(
            phases=self.phases,
            projects=self.projects,
            domain=self.domain,
            launch_plan=self.launch_plan,
            launch_plan_prefix=self.launch_plan_prefix,
            created_after=self.created_after.timestamp() if self.created_after else None,
            created_before=self.created_before.timestamp() if self.created_before else None,
            text=self.text,
        )


def parse_phases(values: Collection[str]) -> list[ExecutionPhase] | None:
    """Phase names in any case; InvalidArgumentError naming the bad one and the phases."""
    if not values:
        return None
    try:
        return [ExecutionPhase(v.upper()) for v in values]
    except ValueError:
        names = ", ".join(p.value.lower() for p in ExecutionPhase)
        raise InvalidArgumentError(f"phase {tuple(values)!r}: phases are {names}") from None


OLDER, NEWER = "o", "n"
"""A cursor's direction: the page after (older than) or before (newer than) its row."""


def encode_cursor(record: ExecutionRecord, direction: str = OLDER) -> str:
    text = f"{direction}|{record.created_at!r}|{record.id}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, float, str]:
    """(direction, created_at, id); a cursor of an older server (no direction) reads older."""
    try:
        parts = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        if len(parts) == 2:
            parts.insert(0, OLDER)
        direction, at, execution_id = parts
        if direction not in (OLDER, NEWER) or not execution_id:
            raise ValueError(direction)
        created = float(at)
        if not math.isfinite(created):
            raise ValueError(at)
        return direction, created, execution_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgumentError(f"cursor {cursor!r} is not one this server gave") from None


async def page(
    repos: Repos, where: ExecutionFilter, limit: int, cursor: str | None, now: float
) -> m.Page[m.ExecutionSummary]:
    """Newest first, `limit` at a time: `next_cursor` pages on to older executions,
    `prev_cursor` back to newer ones; `total` counts every execution the filter selects."""
    listing = where.listing()
    direction, at, execution_id = decode_cursor(cursor) if cursor else (OLDER, 0.0, "")
    key = (at, execution_id) if cursor else None
    if direction == NEWER:
        records = await repos.executions.listing_page(listing, newer_than=key, limit=limit + 1)
        newer, records = len(records) > limit, records[-limit:]
        older = True
    else:
        records = await repos.executions.listing_page(listing, older_than=key, limit=limit + 1)
        older, records = len(records) > limit, records[:limit]
        newer = cursor is not None
    positions = await pending_positions(repos, records)
    items = [convert.execution_summary(r, now, positions.get(r.id)) for r in records]
    return m.Page[m.ExecutionSummary](
        items=items,
        next_cursor=encode_cursor(records[-1]) if older and records else None,
        prev_cursor=encode_cursor(records[0], NEWER) if newer and records else None,
        total=await repos.executions.count(listing),
    )


async def pending_positions(repos: Repos, records: list[ExecutionRecord]) -> dict[str, int]:
    """Each PENDING execution's place (1 = next) in its queue now: its launch plan name's, or
    its key's while the policy governing the name is keyed."""
    queues = {
        (r.project, r.domain, r.launch_plan, r.launch_plan_version, r.concurrency_key or "")
        for r in records
        if r.phase is ExecutionPhase.PENDING
    }
    repo = ConcurrencyRepository(repos.conn)
    positions: dict[str, int] = {}
    keyed: dict[tuple[str, str, str | None, str | None], bool] = {}
    for project, domain, launch_plan, version, key in queues:
        where = (project, domain, launch_plan, version)
        if where not in keyed:
            keyed[where] = await is_keyed(repos, project, domain, launch_plan, version)
        order = await repo.pending_order(
            project, domain, launch_plan, key if keyed[where] else None
        )
        positions.update({execution_id: i for i, execution_id in enumerate(order, 1)})
    listed = {r.id for r in records}
    return {k: v for k, v in positions.items() if k in listed}


def queue_order(summary: m.ExecutionSummary) -> tuple[str, str, int]:
    """PENDING executions in the order of their queues (launch plan, key), then position."""
    return (summary.launch_plan or "", summary.concurrency_key or "", summary.position or 0)


async def by_id_or_prefix(
    repos: Repos, text: str, projects: Collection[str] | None = None
) -> ExecutionRecord:
    """The execution with this id, or the only one whose id starts with it (what `ls`
    shows); a prefix of several is an error naming them. Outside `projects` it does not
    exist."""
    record = await repos.executions.get(text)
    if record is None:
        matches = await repos.executions.ids_starting_with(text, MATCHES_SHOWN + 1, projects)
        if len(matches) > 1:
            more = ", ..." if len(matches) > MATCHES_SHOWN else ""
            listed = ", ".join(matches[:MATCHES_SHOWN]) + more
            raise InvalidArgumentError(f"execution {text!r} is ambiguous, it matches: {listed}")
        record = await repos.executions.get(matches[0]) if matches else None
    if record is None or (projects is not None and record.project not in projects):
        raise NotFoundError(f"execution {text!r} does not exist")
    return record


async def _log_bytes(repos: Repos, execution_id: str) -> dict[tuple[str, int], int]:
    """Bytes of log kept per (node, attempt), from the log index."""
    sizes: dict[tuple[str, int], int] = {}
    for segment in await log_index.segments(repos.conn, execution_id):
        key = (segment.key.node_id, segment.key.attempt)
        sizes[key] = sizes.get(key, 0) + segment.bytes
    return sizes


async def detail(
    repos: Repos,
    record: ExecutionRecord,
    now: float,
    *,
    with_events: bool,
) -> m.Execution:
    """One execution with its nodes (in workflow order), their attempts and, if asked, events."""
    workflow = await repos.specs.get_workflow(
        record.project, record.domain, record.workflow_name, record.workflow_version
    )
    nodes = {n.node_id: n for n in await repos.nodes.list(record.id)}
    specs = {n.id: n for n in workflow.nodes} if workflow else {}
    stored = {node_id: (n.inputs, n.outputs) for node_id, n in nodes.items()}
    shown = node_order(workflow, stored) if workflow else [ShownNode(n) for n in sorted(nodes)]
    events = await repos.events.list(record.id)
    by_node: dict[str, list[EventRecord]] = {}
    for e in events:
        by_node.setdefault(e.node_id, []).append(e)
    sizes = await _log_bytes(repos, record.id)
    views = [
        convert.node_execution(
            nodes[node.id],
            workflow,
            specs.get(node.id),
            by_node.get(node.id, []),
            {a: b for (n, a), b in sizes.items() if n == node.id},
            child=node if node.parent else None,
        )
        for node in shown
        if node.id in nodes
    ]
    positions = await pending_positions(repos, [record])
    return convert.execution(
        record, views, events if with_events else [], now, positions.get(record.id)
    )
