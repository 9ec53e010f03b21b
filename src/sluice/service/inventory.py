"""What the deployment holds, for the service's read verbs: quotas with holders and waiters,
locks, cache entries and reservations, caps and the controller, plugins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.concurrency.caps import CapsService
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.errors import InvalidArgumentError, NotFoundError, StoreError
from sluice.plugins.builtin import builtin_entries
from sluice.plugins.core.phase import Phase
from sluice.resources import NamespaceSnapshot
from sluice.service import convert
from sluice.service import models as m
from sluice.service.local import controller_live
from sluice.spec.names import (
    LOCK_PREFIX,
    check_namespace_name,
    check_scope_name,
    lock_name_problem,
)
from sluice.store.migrate import head_revision
from sluice.store.records import NodeRecord
from sluice.store.store import Repos

if TYPE_CHECKING:
    from sluice.runtime import Runtime


def is_lock(namespace: str) -> bool:
    return namespace.startswith(LOCK_PREFIX)


def check_quota_namespace(namespace: str) -> None:
    """A quota namespace, or `lock:<lock name>` to change one lock's capacity."""
    if is_lock(namespace):
        problem = lock_name_problem(namespace.removeprefix(LOCK_PREFIX))
        if problem:
            raise InvalidArgumentError(f"namespace {namespace!r}: {problem}")
        return
    check_namespace_name(namespace)


async def quota(runtime: Runtime, namespace: str) -> m.Quota:
    """One namespace as it is now: a quota's, or a lock's (`lock:<name>`) capacity."""
    await runtime.resources.start()
    snapshots = await runtime.resources.describe(namespace)
    found = [s for s in snapshots if s.namespace == namespace]
    if not found:
        raise NotFoundError(f"namespace {namespace!r} is not known to the resource manager")
    return convert.quota(found[0])


async def quotas(runtime: Runtime, namespace: str | None) -> list[m.Quota]:
    await runtime.resources.start()
    snapshots = await runtime.resources.describe(namespace)
    return [convert.quota(s) for s in snapshots if not is_lock(s.namespace)]


async def locks(runtime: Runtime) -> list[m.Lock]:
    """Held locks with their holders, and the tasks waiting for each with their reason."""
    await runtime.resources.start()
    snapshots = {
        s.namespace.removeprefix(LOCK_PREFIX): s
        for s in await runtime.resources.describe()
        if is_lock(s.namespace) and (s.holders or s.waiters)
    }
    async with runtime.store.read() as repos:
        claiming = await repos.nodes.find_claiming()
    waiting = _waiting_by_lock(claiming)
    return [
        _lock(name, snapshots.get(name), waiting.get(name, []))
        for name in sorted(set(snapshots) | set(waiting))
    ]


def _waiting_by_lock(nodes: list[NodeRecord]) -> dict[str, list[NodeRecord]]:
    """Nodes that need a lock and have not started their task, by lock name."""
    waiting: dict[str, list[NodeRecord]] = {}
    for node in nodes:
        if node.attempt_started_at is None:
            for name in (node.claims or {}).get("locks", []):
                waiting.setdefault(name, []).append(node)
    return waiting


def _lock(name: str, snapshot: NamespaceSnapshot | None, waiting: list[NodeRecord]) -> m.Lock:
    holders = snapshot.holders if snapshot else ()
    return m.Lock(
        lock=name,
        capacity=snapshot.quota if snapshot else None,
        holders=[f"{h.execution_id}/{h.node_id}" for h in holders],
        waiters=[
            m.LockWaiter(node=f"{n.execution_id}/{n.node_id}", reason=n.reason) for n in waiting
        ],
    )


async def cache_entries(runtime: Runtime, task_name: str | None, limit: int) -> list[m.CacheEntry]:
    catalog = await runtime.open_catalog()
    if task_name is not None:
        task_name = await catalog.resolve_task_name(task_name)
    return [
        m.CacheEntry(
            key=e.key,
            task=e.task_name,
            cache_version=e.cache_version,
            created_at=m.utc(e.created_at),
            execution=e.source.execution_id,
            node=e.source.node_id,
        )
        for e in await catalog.list_entries(task_name=task_name, limit=limit)
    ]


async def remove_cache_entries(
    runtime: Runtime, keys: tuple[str, ...], task_name: str | None
) -> int:
    """Remove entries by key (full or unique prefix) or task name; NotFoundError when
    nothing matched, so a mistyped key never reads as a success."""
    if not keys and not task_name:
        raise InvalidArgumentError("removing cache entries needs keys or a task name")
    catalog = await runtime.open_catalog()
    full_keys = await catalog.resolve_keys(keys) if keys else []
    task = await catalog.resolve_task_name(task_name) if task_name is not None else None
    if task is not None and not await catalog.list_entries(task_name=task, limit=1):
        raise NotFoundError(f"no cache entries of task {task_name!r}")
    removed = await catalog.remove_entries(full_keys, task_name=task)
    if removed == 0:  # removed by someone else since they were resolved
        raise NotFoundError("no cache entry matched: nothing removed")
    return removed


async def reservations(runtime: Runtime) -> list[m.Reservation]:
    """Every reservation, the task its owner computes, and who waits for it."""
    listed = await (await runtime.open_catalog()).list_reservations()
    async with runtime.store.read() as repos:
        waiting = await repos.nodes.find_in_task_phase(int(Phase.WAITING_FOR_CACHE))
        tasks = {i.reservation.owner: await _task_of(repos, i.reservation.owner) for i in listed}
    return [
        m.Reservation(
            key=i.reservation.key,
            task=tasks[i.reservation.owner],
            owner=i.reservation.owner,
            expires_in=round(i.expires_in, 1),
            waiters=[
                f"{n.execution_id}/{n.node_id}" for n in waiting if i.reservation.owner in n.reason
            ],
        )
        for i in listed
    ]


async def _task_of(repos: Repos, owner_id: str) -> str:
    """The task an owner id ("execution/node") runs, when the store still knows it."""
    execution_id, _, node_id = owner_id.partition("/")
    record = await repos.executions.get(execution_id)
    if record is None:
        return ""
    spec = await repos.specs.get_workflow(
        record.project, record.domain, record.workflow_name, record.workflow_version
    )
    try:
        return spec.tasks[spec.node(node_id).task].name if spec else ""
    except KeyError:
        return ""


async def caps(runtime: Runtime) -> list[m.Cap]:
    rows = await CapsService(runtime.store, runtime.notifier, runtime.clock).list()
    return [
        m.Cap(scope=r.scope, config=r.config_max, operator=r.operator_max, effective=r.effective)
        for r in rows
    ]


async def controller_status(runtime: Runtime) -> m.ControllerStatus:
    live = await controller_live(runtime)
    async with runtime.store.read() as repos:
        leader = await ConcurrencyRepository(repos.conn).leader()
        pending = await ConcurrencyRepository(repos.conn).pending_counts()
    return m.ControllerStatus(
        live=live,
        leader=None
        if leader is None
        else m.Leader(
            holder=leader["holder"],
            epoch=leader["epoch"],
            acquired_at=m.utc(leader["acquired_at"]),
            heartbeat_at=m.utc(leader.get("heartbeat_at")),
        ),
        pending=[m.PendingCount(**row) for row in pending],
    )


async def plugins(runtime: Runtime) -> list[m.Plugin]:
    registry = await runtime.load_plugins()
    builtin = {e.id for e in builtin_entries()}
    unavailable = registry.unavailable()
    return [
        m.Plugin(
            id=e.id,
            task_types=list(e.task_types),
            default=e.is_default,
            source="builtin" if e.id in builtin else "entry point",
            loaded=e.id in registry.plugins and e.id not in unavailable,
            why=unavailable.get(e.id) or (None if e.id in registry.plugins else "not enabled"),
        )
        for e in registry.entries
    ]


async def readiness(runtime: Runtime) -> m.Health:
    db = runtime.store.db
    try:
        await db.probe()
    except StoreError as exc:
        return m.Health(ok=False, database=db.dialect, detail=str(exc))
    return m.Health(ok=True, database=db.dialect, schema_revision=head_revision())


def cap_scope(text: str) -> tuple[str, str]:
    """`PROJECT` or `PROJECT/DOMAIN` as (project, domain); InvalidArgumentError naming it."""
    project, _, domain = text.partition("/")
    if not project or "/" in domain:
        raise InvalidArgumentError(f"scope {text!r} is not PROJECT or PROJECT/DOMAIN")
    check_scope_name(f"scope {text!r}: project", project)
    if domain:
        check_scope_name(f"scope {text!r}: domain", domain)
    return project, domain
