"""`sluice concurrency caps ls|set|unset` and `sluice concurrency status`."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, print_json, run_async, state
from sluice.concurrency.caps import CapsService
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.errors import InvalidArgumentError
from sluice.runtime import Runtime
from sluice.service.local import controller_live
from sluice.spec.names import check_scope_name
from sluice.spec.values import check_count


@click.group("concurrency")
def concurrency() -> None:
    """Execution concurrency: platform caps and the controller."""


@concurrency.group("caps")
def caps() -> None:
    """Platform caps on active executions per project and per project/domain."""


def _scope(text: str) -> tuple[str, str]:
    project, _, domain = text.partition("/")
    if not project or "/" in domain:
        raise InvalidArgumentError(f"scope {text!r} is not PROJECT or PROJECT/DOMAIN")
    check_scope_name(f"scope {text!r}: project", project)
    if domain:
        check_scope_name(f"scope {text!r}: domain", domain)
    return project, domain


def _service(runtime: Runtime) -> CapsService:
    return CapsService(runtime.store, runtime.notifier, runtime.clock)


@caps.command("set")
@click.argument("scope")
@click.argument("value", type=int)
@click.pass_context
@run_async
async def caps_set(ctx: click.Context, scope: str, value: int) -> None:
    """Cap the active executions of SCOPE (PROJECT or PROJECT/DOMAIN) at VALUE; it wins over
    the config and applies to the next decision of the live controller."""
    project, domain = _scope(scope)
    check_count(f"cap of {scope!r}", value, InvalidArgumentError, low=1)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        await _service(runtime).set(project, domain, value)
    finally:
        await runtime.close()
    click.echo(f"cap of {scope}: {value} active executions")


@caps.command("unset")
@click.argument("scope")
@click.pass_context
@run_async
async def caps_unset(ctx: click.Context, scope: str) -> None:
    """Remove the operator cap of SCOPE; a config cap of the same scope applies again."""
    project, domain = _scope(scope)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        await _service(runtime).unset(project, domain)
    finally:
        await runtime.close()
    click.echo(f"operator cap of {scope} removed")


@caps.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def caps_ls(ctx: click.Context, as_json: bool) -> None:
    """Every stored cap: its config value, its operator value and the one in force."""
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        rows = await _service(runtime).list()
    finally:
        await runtime.close()
    listed = [
        {
            "scope": r.scope,
            "config": r.config_max,
            "operator": r.operator_max,
            "effective": r.effective,
        }
        for r in rows
    ]
    if as_json:
        print_json(listed)
        return
    table = Table()
    for column in ("scope", "config", "operator", "in force"):
        table.add_column(column)
    for row in listed:
        table.add_row(*(str(row[k]) if row[k] is not None else "" for k in row))
    Console().print(table)


@concurrency.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def status(ctx: click.Context, as_json: bool) -> None:
    """Whether a controller is live, which one leads, and how many executions wait."""
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        live = await controller_live(runtime)
        async with runtime.store.read() as repos:
            leader = await ConcurrencyRepository(repos.conn).leader()
            pending = await ConcurrencyRepository(repos.conn).pending_counts()
    finally:
        await runtime.close()
    report: dict[str, Any] = {"live": live, "leader": leader, "pending": pending}
    if as_json:
        print_json(report)
        return
    if not live:
        click.echo("no live controller: PENDING executions wait for `sluice serve`")
    if leader is not None:
        word = "leads" if live else "led last"
        click.echo(
            f"controller {leader['holder']} {word} (epoch {leader['epoch']}, "
            f"since {iso(leader['acquired_at'])})"
        )
    for row in pending:
        click.echo(f"{row['launch_plan'] or '(no launch plan)'}: {row['pending']} pending")
