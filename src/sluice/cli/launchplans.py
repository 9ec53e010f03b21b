"""`sluice launchplan register|ls|activate|deactivate`."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, print_json, run_async, state
from sluice.errors import DefinitionError
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.policies import launch_plan_spec
from sluice.runtime import Runtime
from sluice.sdk.launch_plan import LaunchPlan
from sluice.sdk.loader import load_target
from sluice.spec.names import check_entity_name
from sluice.store.records import LaunchPlanRecord


@click.group("launchplan")
def launchplan() -> None:
    """Launch plans: versions, the ACTIVE one, their policies and schedules."""


def _service(runtime: Runtime) -> LaunchPlanService:
    settings = runtime.settings
    return LaunchPlanService(
        runtime.store, runtime.notifier, runtime.clock, settings.project, settings.domain
    )


@launchplan.command("register")
@click.argument("target")
@click.option("--activate", is_flag=True, help="Make this version the ACTIVE one.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def register(ctx: click.Context, target: str, activate: bool, as_json: bool) -> None:
    """Register the launch plan TARGET (path/to/file.py:name) as a version of its name."""
    plan = load_target(target)
    if not isinstance(plan, LaunchPlan):
        raise DefinitionError(f"{target!r} is a {type(plan).__name__}, not a LaunchPlan")
    spec, workflow = plan.spec, plan.workflow.spec  # a bad policy or schedule raises here
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        if spec.schedule is not None:  # every firing would be refused: refuse the plan now
            await runtime.check_launch(plan, {})
        record = await _service(runtime).register(spec, workflow, activate=activate)
    finally:
        await runtime.close()
    if as_json:
        print_json(launch_plan_json(record))
        return
    click.echo(f"launch plan {record.name} version {record.version} registered ({record.state})")


@launchplan.command("ls")
@click.option("--name", help="Only versions of this launch plan.")
@click.option("--active", "active_only", is_flag=True, help="Only ACTIVE versions.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ls(ctx: click.Context, name: str | None, active_only: bool, as_json: bool) -> None:
    """Launch plan versions of the project and domain, oldest first per name."""
    if name is not None:
        check_entity_name("--name", name)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        records = await _service(runtime).find(name, active_only=active_only)
    finally:
        await runtime.close()
    rows = [launch_plan_json(r) for r in records]
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("name", "version", "state", "workflow", "concurrency", "schedule", "created"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["name"],
            row["version"],
            row["state"],
            row["workflow"],
            _policy_text(row["concurrency"]),
            _schedule_text(row["schedule"]),
            iso(row["created_at"]),
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
    check_entity_name("launch plan name", name)
    if version is not None:
        check_entity_name("--version", version)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        record = await _service(runtime).activate(name, version)
    finally:
        await runtime.close()
    click.echo(f"launch plan {record.name} version {record.version} is ACTIVE")


@launchplan.command("deactivate")
@click.argument("name")
@click.pass_context
@run_async
async def deactivate(ctx: click.Context, name: str) -> None:
    """Leave NAME with no ACTIVE version: its schedule stops."""
    check_entity_name("launch plan name", name)
    runtime = await Runtime.open(state(ctx).settings, role="cli")
    try:
        was = await _service(runtime).deactivate(name)
    finally:
        await runtime.close()
    if was is None:
        click.echo(f"launch plan {name} had no ACTIVE version")
    else:
        click.echo(f"launch plan {name} version {was.version} deactivated")


def launch_plan_json(record: LaunchPlanRecord) -> dict[str, Any]:
    spec = launch_plan_spec(record.spec).model_dump(mode="json")
    return {
        "project": record.project,
        "domain": record.domain,
        "name": record.name,
        "version": record.version,
        "state": record.state,
        "workflow": record.workflow,
        "concurrency": spec["concurrency"],
        "schedule": spec["schedule"],
        "priority": spec["priority"],
        "default_inputs": spec["default_inputs"],
        "fixed_inputs": spec["fixed_inputs"],
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _policy_text(policy: dict[str, Any] | None) -> str:
    if not policy:
        return ""
    text = f"max {policy['max']} {policy['behavior']}"
    pending = policy.get("max_pending")
    return text if pending is None else f"{text}, max_pending {pending}"


def _schedule_text(schedule: dict[str, Any] | None) -> str:
    if not schedule:
        return ""
    if schedule.get("cron"):
        return f"cron {schedule['cron']} ({schedule['timezone']})"
    return f"every {schedule['fixed_rate']:g} s"
