"""What a caller scoped to some projects sees of the deployment-wide views: only what its
projects hold or wait for. Totals (a quota's tokens in use, a lock's capacity) stay whole:
they are the deployment's, and a caller needs them to read its own wait. An unscoped caller
(`projects` None) sees everything, unchanged."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from sluice.service import models as m

if TYPE_CHECKING:
    from sluice.runtime import Runtime


def _execution_of(owner: str) -> str:
    """`execution/node` -> execution."""
    return owner.partition("/")[0]


async def _visible(runtime: Runtime, ids: Iterable[str], projects: Collection[str]) -> set[str]:
    async with runtime.store.read() as repos:
        found = await repos.executions.projects_of(list(ids))
    return {execution for execution, project in found.items() if project in projects}


async def visible_executions(
    runtime: Runtime, ids: Iterable[str], projects: Collection[str]
) -> set[str]:
    """The executions among `ids` that belong to one of `projects`."""
    return await _visible(runtime, ids, projects)


def quotas(found: list[m.Quota], projects: Collection[str] | None) -> list[m.Quota]:
    if projects is None:
        return found
    return [
        q.model_copy(
            update={
                "holders": [h for h in q.holders if h.project in projects],
                "waiters": [w for w in q.waiters if w.project in projects],
            }
        )
        for q in found
    ]


async def locks(
    runtime: Runtime, found: list[m.Lock], projects: Collection[str] | None
) -> list[m.Lock]:
    if projects is None:
        return found
    owners = [h for lock in found for h in lock.holders]
    owners += [w.node for lock in found for w in lock.waiters]
    seen = await _visible(runtime, map(_execution_of, owners), projects)
    shown = [
        lock.model_copy(
            update={
                "holders": [h for h in lock.holders if _execution_of(h) in seen],
                "waiters": [w for w in lock.waiters if _execution_of(w.node) in seen],
            }
        )
        for lock in found
    ]
    return [lock for lock in shown if lock.holders or lock.waiters]


async def cache_entries(
    runtime: Runtime, found: list[m.CacheEntry], projects: Collection[str] | None
) -> list[m.CacheEntry]:
    if projects is None:
        return found
    seen = await _visible(runtime, (e.execution for e in found), projects)
    return [e for e in found if e.execution in seen]


async def reservations(
    runtime: Runtime, found: list[m.Reservation], projects: Collection[str] | None
) -> list[m.Reservation]:
    if projects is None:
        return found
    owners = [r.owner for r in found] + [w for r in found for w in r.waiters]
    seen = await _visible(runtime, map(_execution_of, owners), projects)
    return [
        r.model_copy(update={"waiters": [w for w in r.waiters if _execution_of(w) in seen]})
        for r in found
        if _execution_of(r.owner) in seen
    ]


def caps(found: list[m.Cap], projects: Collection[str] | None) -> list[m.Cap]:
    if projects is None:
        return found
    return [c for c in found if c.scope.partition("/")[0] in projects]


def controller_status(
    found: m.ControllerStatus, projects: Collection[str] | None
) -> m.ControllerStatus:
    if projects is None:
        return found
    pending = [p for p in found.pending if p.project in projects]
    return found.model_copy(update={"pending": pending})
