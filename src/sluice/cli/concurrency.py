"""`sluice concurrency caps ls|set|unset` and `sluice concurrency status`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async


@click.group("concurrency")
def concurrency() -> None:
    """Execution concurrency: platform caps and the controller."""


@concurrency.group("caps")
def caps() -> None:
    """Platform caps on active executions per project and per project/domain."""


@caps.command("set")
@click.argument("scope")
@click.argument("value", type=int)
@click.pass_context
@run_async
async def caps_set(ctx: click.Context, scope: str, value: int) -> None:
    """Cap the active executions of SCOPE (PROJECT or PROJECT/DOMAIN) at VALUE; it wins over
    the config and applies to the next decision of the live controller."""
    async with opened(ctx) as service:
        await service.set_cap(scope, value)
    click.echo(f"cap of {scope}: {value} active executions")


@caps.command("unset")
@click.argument("scope")
@click.pass_context
@run_async
async def caps_unset(ctx: click.Context, scope: str) -> None:
    """Remove the operator cap of SCOPE; a config cap of the same scope applies again."""
    async with opened(ctx) as service:
        await service.set_cap(scope, None)
    click.echo(f"operator cap of {scope} removed")


@caps.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def caps_ls(ctx: click.Context, as_json: bool) -> None:
    """Every stored cap: its config value, its operator value and the one in force."""
    async with opened(ctx) as service:
        rows = await service.caps()
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("scope", "config", "operator", "in force"):
        table.add_column(column)
    for row in rows:
        values = (row.config, row.operator, row.effective)
        table.add_row(row.scope, *("" if v is None else str(v) for v in values))
    Console().print(table)


@concurrency.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def status(ctx: click.Context, as_json: bool) -> None:
    """Whether a controller is live, which one leads, and how many executions wait."""
    async with opened(ctx) as service:
        report = await service.controller_status()
    if as_json:
        print_json(report)
        return
    if not report.live:
        click.echo("no live controller: PENDING executions wait for `sluice serve`")
    if report.leader is not None:
        word = "leads" if report.live else "led last"
        leader = report.leader
        click.echo(
            f"controller {leader.holder} {word} (epoch {leader.epoch}, "
            f"since {iso(leader.acquired_at)})"
        )
    for row in report.pending:
        click.echo(f"{row.launch_plan or '(no launch plan)'}: {row.pending} pending")
