"""`sluice quota ls|set` and `sluice locks ls`."""

from __future__ import annotations

import dataclasses
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.errors import InvalidArgumentError, InvalidQuotaError
from sluice.resources import NamespaceSnapshot
from sluice.spec.names import LOCK_PREFIX, check_namespace_name, lock_name_problem
from sluice.spec.values import check_count
from sluice.store.records import NodeRecord


@click.group("quota")
def quota() -> None:
    """Resource quotas: tokens of named resources that tasks claim."""


def _snapshot_json(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    return dataclasses.asdict(snapshot)


@quota.command("ls")
@click.argument("namespace", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def quota_ls(ctx: click.Context, namespace: str | None, as_json: bool) -> None:
    """Quota, tokens in use, holders and waiters of NAMESPACE (or every namespace)."""
    async with opened(ctx) as runtime:
        await runtime.resources.start()
        snapshots = await runtime.resources.describe(namespace)
    snapshots = [s for s in snapshots if not s.namespace.startswith(LOCK_PREFIX)]
    if as_json:
        print_json([_snapshot_json(s) for s in snapshots])
        return
    console = Console(highlight=False)
    for snapshot in snapshots:
        _print_snapshot(console, snapshot)


def _print_snapshot(console: Console, s: NamespaceSnapshot) -> None:
    source = f" ({s.quota_source})" if s.quota_source else ""
    console.print(
        f"[bold]{s.namespace}[/]: {s.in_use}/{s.quota}{source} in use, {len(s.waiters)} waiting"
    )
    if s.holders:
        table = Table(
            "holder token",
            "execution",
            "node",
            "units",
            "since",
            "lease expires",
            title="holders",
            title_justify="left",
        )
        for h in s.holders:
            table.add_row(
                h.token,
                h.execution_id,
                h.node_id,
                str(h.units),
                iso(h.since),
                iso(h.lease_expires_at),
            )
        console.print(table)
    if s.waiters:
        table = Table(
            "position",
            "execution",
            "node",
            "units",
            "since",
            "blocked by",
            title="waiters",
            title_justify="left",
        )
        for w in s.waiters:
            table.add_row(
                str(w.position),
                w.execution_id,
                w.node_id,
                str(w.units),
                iso(w.since),
                w.blocking_scope or "older claims",
            )
        console.print(table)


@quota.command("set")
@click.argument("namespace")
@click.argument("value", type=int)
@click.pass_context
@run_async
async def quota_set(ctx: click.Context, namespace: str, value: int) -> None:
    """Set NAMESPACE's quota to VALUE for every process (it wins over config and plugins).
    Lowering it never revokes held tokens."""
    _check_quota_namespace(namespace)
    check_count(f"quota of {namespace!r}", value, InvalidQuotaError, low=1)
    async with opened(ctx) as runtime:
        await runtime.resources.start()
        await runtime.resources.set_quota(namespace, value)
    click.echo(f"quota of {namespace} set to {value}")


def _check_quota_namespace(namespace: str) -> None:
    """A quota namespace, or `lock:<lock name>` to change one lock's capacity."""
    if namespace.startswith(LOCK_PREFIX):
        problem = lock_name_problem(namespace.removeprefix(LOCK_PREFIX))
        if problem:
            raise InvalidArgumentError(f"namespace {namespace!r}: {problem}")
        return
    check_namespace_name(namespace)


@click.group("locks")
def locks() -> None:
    """Lock names tasks hold exclusively (one resource namespace each)."""


@locks.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def locks_ls(ctx: click.Context, as_json: bool) -> None:
    """Held locks with their holders, and the tasks waiting for each with the scheduler's
    reason (position in the policy's order, what blocks them; refreshed at each resync)."""
    async with opened(ctx) as runtime:
        await runtime.resources.start()
        snapshots = {
            s.namespace[len(LOCK_PREFIX) :]: s
            for s in await runtime.resources.describe()
            if s.namespace.startswith(LOCK_PREFIX) and (s.holders or s.waiters)
        }
        async with runtime.store.read() as repos:
            claiming = await repos.nodes.find_claiming()
    waiting = _waiting_by_lock(claiming)
    rows = [
        _lock_row(name, snapshots.get(name), waiting.get(name, []))
        for name in sorted(set(snapshots) | set(waiting))
    ]
    if as_json:
        print_json(rows)
        return
    table = Table("lock", "capacity", "held by", "waiting tasks and why")
    for row in rows:
        waiters = "\n".join(f"{w['node']}: {w['reason']}" for w in row["waiters"])
        table.add_row(row["lock"], str(row["capacity"] or ""), ", ".join(row["holders"]), waiters)
    Console().print(table)


def _waiting_by_lock(nodes: list[NodeRecord]) -> dict[str, list[NodeRecord]]:
    """Nodes that need a lock and have not started their task, by lock name."""
    waiting: dict[str, list[NodeRecord]] = {}
    for node in nodes:
        if node.attempt_started_at is None:
            for name in (node.claims or {}).get("locks", []):
                waiting.setdefault(name, []).append(node)
    return waiting


def _lock_row(
    name: str, snapshot: NamespaceSnapshot | None, waiting: list[NodeRecord]
) -> dict[str, Any]:
    holders = snapshot.holders if snapshot else ()
    return {
        "lock": name,
        "capacity": snapshot.quota if snapshot else None,
        "holders": [f"{h.execution_id}/{h.node_id}" for h in holders],
        "waiters": [{"node": f"{n.execution_id}/{n.node_id}", "reason": n.reason} for n in waiting],
    }


COMMANDS = [quota, locks]
