"""`sluice quota ls|set` and `sluice locks ls`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.service.models import Quota


@click.group("quota")
def quota() -> None:
    """Resource quotas: tokens of named resources that tasks claim."""


@quota.command("ls")
@click.argument("namespace", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def quota_ls(ctx: click.Context, namespace: str | None, as_json: bool) -> None:
    """Quota, tokens in use, holders and waiters of NAMESPACE (or every namespace)."""
    async with opened(ctx) as service:
        quotas = await service.quotas(namespace)
    if as_json:
        print_json(quotas)
        return
    console = Console(highlight=False)
    for q in quotas:
        _print_quota(console, q)


def _print_quota(console: Console, q: Quota) -> None:
    source = f" ({q.quota_source})" if q.quota_source else ""
    console.print(
        f"[bold]{q.namespace}[/]: {q.in_use}/{q.quota}{source} in use, {len(q.waiters)} waiting"
    )
    if q.holders:
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
        for h in q.holders:
            table.add_row(
                h.token,
                h.execution_id,
                h.node_id,
                str(h.units),
                iso(h.since),
                iso(h.lease_expires_at),
            )
        console.print(table)
    if q.waiters:
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
        for w in q.waiters:
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
@click.option(
    "--preempt/--no-preempt",
    default=None,
    help="Let a higher-priority claim preempt lower-priority holders here (or stop it).",
)
@click.pass_context
@run_async
async def quota_set(ctx: click.Context, namespace: str, value: int, preempt: bool | None) -> None:
    """Set NAMESPACE's quota to VALUE for every process (it wins over config and plugins).
    Lowering it never revokes held tokens."""
    async with opened(ctx) as service:
        await service.set_quota(namespace, value, preempt=preempt)
    flag = "" if preempt is None else f", preemption {'on' if preempt else 'off'}"
    click.echo(f"quota of {namespace} set to {value}{flag}")


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
    async with opened(ctx) as service:
        rows = await service.locks()
    if as_json:
        print_json(rows)
        return
    table = Table("lock", "capacity", "held by", "waiting tasks and why")
    for row in rows:
        waiters = "\n".join(f"{w.node}: {w.reason}" for w in row.waiters)
        table.add_row(row.lock, str(row.capacity or ""), ", ".join(row.holders), waiters)
    Console().print(table)


COMMANDS = [quota, locks]
