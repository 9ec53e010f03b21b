"""`sluice cache ls|rm` and `sluice reservations ls`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.errors import InvalidArgumentError
from sluice.spec.values import MAX_LIST_LIMIT, check_count


@click.group("cache")
def cache() -> None:
    """Cached task outputs."""


@cache.command("ls")
@click.option(
    "--task",
    "task_name",
    help="Only entries of this task name (the full name, or its last part when unique).",
)
@click.option("--limit", default=100, show_default=True, type=int, help="At most this many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def cache_ls(ctx: click.Context, task_name: str | None, limit: int, as_json: bool) -> None:
    """Cache entries, newest first: key (its first 16 characters; `cache rm` takes them), task,
    cache version, when, which run computed it."""
    check_count("--limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
    async with opened(ctx) as service:
        entries = await service.cache_entries(task_name, limit)
    if as_json:
        print_json(entries)
        return
    table = Table()
    table.add_column("key", no_wrap=True, min_width=SHOWN_KEY)  # whole, to copy
    for column in ("task", "version", "created", "computed by"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(
            e.key[:SHOWN_KEY], e.task, e.cache_version, iso(e.created_at), f"{e.execution}/{e.node}"
        )
    Console().print(table)


SHOWN_KEY = 16
"""Characters of a key `cache ls` shows; any unique prefix names the entry to `cache rm`."""


@cache.command("rm")
@click.argument("keys", nargs=-1)
@click.option(
    "--task",
    "task_name",
    help="Remove every entry of this task name (the full name, or its last part when unique).",
)
@click.pass_context
@run_async
async def cache_rm(ctx: click.Context, keys: tuple[str, ...], task_name: str | None) -> None:
    """Remove entries by KEY (a full key or a unique prefix, such as the 16 characters
    `cache ls` shows) or by --task. Nothing is removed, and the exit code is 2, if a KEY
    matches no entry or several, or --task names no entries."""
    if not keys and not task_name:
        raise InvalidArgumentError("cache rm needs KEY arguments or --task NAME")
    async with opened(ctx) as service:
        removed = await service.remove_cache_entries(keys, task_name)
    click.echo(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}")


@click.group("reservations")
def reservations() -> None:
    """Cache reservations: who computes what others wait for."""


@reservations.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def reservations_ls(ctx: click.Context, as_json: bool) -> None:
    """Every reservation: key, task, owner (execution/node), seconds until it expires, and
    the nodes waiting for it."""
    async with opened(ctx) as service:
        listed = await service.reservations()
    if as_json:
        print_json(listed)
        return
    table = Table()
    for column in ("key", "task", "owner", "expires in", "waiting"):
        table.add_column(column, overflow="fold")
    for r in listed:
        expires = r.expires_in
        table.add_row(
            r.key[:16],
            r.task,
            r.owner,
            f"{expires:.1f}s" if expires >= 0 else f"expired {-expires:.1f}s ago",
            ", ".join(r.waiters),
        )
    Console().print(table)


COMMANDS = [cache, reservations]
