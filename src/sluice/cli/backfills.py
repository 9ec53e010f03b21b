"""`sluice launchplan backfill NAME` and `sluice backfill ls|show|pause|resume|cancel`."""

from __future__ import annotations

from datetime import date, datetime, time

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.errors import InvalidArgumentError
from sluice.service.backfill_views import Backfill


def _when(flag: str, text: str) -> datetime:
    """An ISO-8601 time; a date alone is its first instant (`--from`) or its last (`--to`),
    so `--from 2026-01-01 --to 2026-01-10` covers ten whole days."""
    try:
        if flag == "--to" and len(text) == len("2026-01-10"):
            return datetime.combine(date.fromisoformat(text), time.max)
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(
            f"{flag} {text!r} is not an ISO-8601 date or time (e.g. 2026-01-01 or "
            "2026-01-01T03:00+01:00)"
        ) from None


@click.command("backfill")
@click.argument("name")
@click.option("--from", "start", required=True, metavar="TIME", help="First slot time (ISO-8601).")
@click.option("--to", "end", required=True, metavar="TIME", help="Last slot time (ISO-8601).")
@click.option(
    "--reprocess",
    type=click.Choice(["none", "failed", "all"]),
    default="none",
    show_default=True,
    help="Slots that have an execution: leave them, re-run those that did not succeed, or "
    "re-run every one that ended.",
)
@click.option(
    "--max-active",
    type=int,
    metavar="N",
    help="At most N unfinished executions at once (default: concurrency.backfill_max_active).",
)
@click.option("--wait", is_flag=True, help="Run it here until it is done (no `sluice serve`).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def backfill_command(
    ctx: click.Context,
    name: str,
    start: str,
    end: str,
    reprocess: str,
    max_active: int | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Run launch plan NAME once per schedule slot from --from to --to (both included; a
    time without a zone is in the schedule's time zone; a date alone is the whole day),
    through its concurrency policy and
    at most --max-active at a time. Each slot's execution has a deterministic id: running the
    same backfill again creates nothing new. `sluice serve` runs it (or --wait, here)."""
    first, last = _when("--from", start), _when("--to", end)
    async with opened(ctx) as service:
        found = await service.backfills.create(
            name, first, last, reprocess=reprocess, max_active=max_active
        )
        if wait and found.state not in ("DONE", "CANCELLED"):
            found = await service.backfills.drive(found.id)
    _print(found, as_json)


@click.group("backfill")
def backfill() -> None:
    """Backfills of scheduled launch plans: progress, pause, resume, cancel."""


@backfill.command("ls")
@click.option("--state", help="Only RUNNING, PAUSED, CANCELLED or DONE ones.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ls(ctx: click.Context, state: str | None, as_json: bool) -> None:
    """Backfills, newest first, with their progress."""
    async with opened(ctx) as service:
        found = await service.backfills.list(state)
    if as_json:
        print_json(found)
        return
    table = Table()
    for column in ("id", "launch plan", "state", "slots", "ended", "progress", "from", "to"):
        table.add_column(column, overflow="fold")
    for b in found:
        row = (b.id, b.launch_plan, b.state, str(b.slots), str(b.ended), _progress(b))
        table.add_row(*row, iso(b.start), iso(b.end))
    Console().print(table)


@backfill.command("show")
@click.argument("backfill_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def show(ctx: click.Context, backfill_id: str, as_json: bool) -> None:
    """One backfill: its range, state and slots by the phase of their execution."""
    async with opened(ctx) as service:
        found = await service.backfills.get(backfill_id)
    _print(found, as_json)


def _state_command(verb: str, help_text: str) -> click.Command:
    @click.argument("backfill_id")
    @click.pass_context
    @run_async
    async def command(ctx: click.Context, backfill_id: str) -> None:
        async with opened(ctx) as service:
            found = await getattr(service.backfills, verb)(backfill_id)
        _print(found, False)

    command.__doc__ = help_text
    return click.command(verb)(command)


backfill.add_command(_state_command("pause", "Create no more executions; those that exist run on."))
backfill.add_command(_state_command("resume", "Create executions again, up to the cap."))
backfill.add_command(_state_command("cancel", "Abort unfinished executions; create no more."))


def _progress(found: Backfill) -> str:
    return ", ".join(f"{phase} {count}" for phase, count in found.progress.items())


def _print(found: Backfill, as_json: bool) -> None:
    if as_json:
        print_json(found)
        return
    reason = f" ({found.reason})" if found.reason else ""
    click.echo(
        f"backfill {found.id} of {found.launch_plan} {found.state}{reason}: {found.slots} "
        f"slot(s) from {iso(found.start)} to {iso(found.end)} (UTC), reprocess "
        f"{found.reprocess}, max active {found.max_active}"
    )
    if found.progress:
        click.echo(f"progress: {_progress(found)}; {found.ended}/{found.slots} ended")
