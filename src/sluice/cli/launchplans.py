"""`sluice launchplan register|ls|activate|deactivate`."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.sdk.loader import load_target
from sluice.service.targets import launch_plan_of


@click.group("launchplan")
def launchplan() -> None:
    """Launch plans: versions, the ACTIVE one, their policies and schedules."""


@launchplan.command("register")
@click.argument("target")
@click.option("--activate", is_flag=True, help="Make this version the ACTIVE one.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def register(ctx: click.Context, target: str, activate: bool, as_json: bool) -> None:
    """Register the launch plan TARGET (path/to/file.py:name, a sluice or a flytekit launch
    plan) as a version of its name."""
    plan = load_target(target)
    launch_plan_of(plan)  # not a launch plan, a bad policy or schedule: raises before the store
    async with opened(ctx) as service:
        registered = await service.register_launch_plan(plan, activate=activate)
    if as_json:
        print_json(registered)
        return
    click.echo(
        f"launch plan {registered.name} version {registered.version} registered "
        f"({registered.state})"
    )


@launchplan.command("ls")
@click.option("--name", help="Only versions of this launch plan.")
@click.option("--active", "active_only", is_flag=True, help="Only ACTIVE versions.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ls(ctx: click.Context, name: str | None, active_only: bool, as_json: bool) -> None:
    """Launch plan versions of the project and domain, oldest first per name; an ACTIVE
    scheduled version with its next firing."""
    async with opened(ctx) as service:
        plans = await service.launch_plans(name, active_only=active_only)
    if as_json:
        print_json(plans)
        return
    table = Table()
    columns = ("name", "version", "state", "workflow", "concurrency", "schedule", "next", "created")
    for column in columns:
        table.add_column(column, overflow="fold")
    for p in plans:
        table.add_row(
            p.name,
            p.version,
            p.state,
            p.workflow,
            _policy_text(p.concurrency),
            _schedule_text(p.schedule),
            iso(p.next_firings[0]) if p.next_firings else "",
            iso(p.created_at),
        )
    Console().print(table)


@launchplan.command("activate")
@click.argument("name")
@click.option("--version", help="The version to activate (default: the latest registered).")
@click.pass_context
@run_async
async def activate(ctx: click.Context, name: str, version: str | None) -> None:
    """Make one version of NAME the ACTIVE one: its policy governs every execution of NAME,
    and its schedule (if any) runs."""
    async with opened(ctx) as service:
        plan = await service.activate_launch_plan(name, version)
    click.echo(f"launch plan {plan.name} version {plan.version} is ACTIVE")


@launchplan.command("deactivate")
@click.argument("name")
@click.pass_context
@run_async
async def deactivate(ctx: click.Context, name: str) -> None:
    """Leave NAME with no ACTIVE version: its schedule stops."""
    async with opened(ctx) as service:
        was = await service.deactivate_launch_plan(name)
    if was is None:
        click.echo(f"launch plan {name} had no ACTIVE version")
    else:
        click.echo(f"launch plan {name} version {was.version} deactivated")


def _policy_text(policy: dict[str, Any] | None) -> str:
    if not policy:
        return ""
    text = f"max {policy['max']} {policy['behavior']}"
    if policy.get("key"):
        overrides = ", ".join(f"{k}: {v}" for k, v in sorted(policy.get("key_max", {}).items()))
        text += f" per key {policy['key']}" + (f" ({overrides})" if overrides else "")
        if policy.get("total_max") is not None:
            text += f", total {policy['total_max']}"
    pending = policy.get("max_pending")
    return text if pending is None else f"{text}, max_pending {pending}"


def _schedule_text(schedule: dict[str, Any] | None) -> str:
    if not schedule:
        return ""
    if schedule.get("cron"):
        return f"cron {schedule['cron']} ({schedule['timezone']})"
    return f"every {schedule['fixed_rate']:g} s"
