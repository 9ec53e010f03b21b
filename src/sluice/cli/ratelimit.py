"""`sluice ratelimit ls|set|clear`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.service.rate_limits import RateLimitView


@click.group("ratelimit")
def ratelimit() -> None:
    """Keyed rate limits: at most N calls per second, minute or hour, per key."""


@ratelimit.command("ls")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def ratelimit_ls(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """Limits, their live keys with next free times, and the tasks waiting in each."""
    async with opened(ctx) as service:
        limits = await service.rate_limits.describe(name)
    if as_json:
        print_json(limits)
        return
    console = Console(highlight=False)
    for limit in limits:
        _print_limit(console, limit)


def _print_limit(console: Console, limit: RateLimitView) -> None:
    source = f" ({limit.source})" if limit.source else ""
    waiting = sum(len(k.waiters) for k in limit.keys)
    console.print(
        f"[bold]{limit.name}[/]: {limit.rate or 'no limit set'}{source}, "
        f"{len(limit.keys)} busy key(s), {waiting} waiting"
    )
    if not limit.keys:
        return
    table = Table("key", "available", "next free in", "waiters (position: node, units, since)")
    for key in limit.keys:
        waiters = "\n".join(
            f"{w.position}: {w.execution_id}/{w.node_id}, {w.units}, {iso(w.since)}"
            for w in key.waiters
        )
        table.add_row(key.key or '""', str(key.available), f"{key.next_free_in:.1f} s", waiters)
    console.print(table)


@ratelimit.command("set")
@click.argument("name")
@click.argument("rate")
@click.option("--burst", type=int, default=None, help="Units that may go at once (default 1).")
@click.pass_context
@run_async
async def ratelimit_set(ctx: click.Context, name: str, rate: str, burst: int | None) -> None:
    """Limit NAME to RATE for every engine: COUNT/PERIOD, PERIOD one of s, min, hour or day
    ("100/min"). No window of the period ever holds more than COUNT admissions; a burst B lets
    B go at once, for a sustained pace of COUNT - B + 1 per period. Wins over the config and
    plugins; applies from the next admission."""
    async with opened(ctx) as service:
        limit = await service.rate_limits.set(name, rate, burst)
    click.echo(f"rate limit {limit.name} set to {limit.rate}")


@ratelimit.command("clear")
@click.argument("name")
@click.pass_context
@run_async
async def ratelimit_clear(ctx: click.Context, name: str) -> None:
    """Drop the operator's limit of NAME: the configured or registered one applies again."""
    async with opened(ctx) as service:
        limit = await service.rate_limits.clear(name)
    now = f"{limit.rate} ({limit.source})" if limit.rate else "no limit"
    click.echo(f"rate limit {name} cleared: {now} applies")


COMMANDS = [ratelimit]
