"""`sluice cache ls|rm` and `sluice reservations ls`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async
from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.spec.names import check_entity_name
from sluice.spec.values import MAX_LIST_LIMIT, check_count
from sluice.store.store import Repos


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
    limit = check_count("--limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
    if task_name is not None:
        check_entity_name("--task", task_name)
    async with opened(ctx) as runtime:
        catalog = await runtime.open_catalog()
        if task_name is not None:
            task_name = await catalog.resolve_task_name(task_name)
        entries = await catalog.list_entries(task_name=task_name, limit=limit)
    rows = [
        {
            "key": e.key,
            "task": e.task_name,
            "cache_version": e.cache_version,
            "created_at": e.created_at,
            "execution": e.source.execution_id,
            "node": e.source.node_id,
        }
        for e in entries
    ]
    if as_json:
        print_json(rows)
        return
    table = Table()
    table.add_column("key", no_wrap=True, min_width=SHOWN_KEY)  # whole, to copy
    for column in ("task", "version", "created", "computed by"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(
            e.key[:SHOWN_KEY],
            e.task_name,
            e.cache_version,
            iso(e.created_at),
            f"{e.source.execution_id}/{e.source.node_id}",
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
    if task_name is not None:
        check_entity_name("--task", task_name)
    async with opened(ctx) as runtime:
        catalog = await runtime.open_catalog()
        full_keys = await catalog.resolve_keys(keys) if keys else []
        task = await catalog.resolve_task_name(task_name) if task_name is not None else None
        if task is not None and not await catalog.list_entries(task_name=task, limit=1):
            raise NotFoundError(f"no cache entries of task {task_name!r}")
        removed = await catalog.remove_entries(full_keys, task_name=task)
    if removed == 0:  # removed by someone else since they were resolved
        raise NotFoundError("no cache entry matched: nothing removed")
    click.echo(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}")


@click.group("reservations")
def reservations() -> None:
    """Cache reservations: who computes what others wait for."""


@reservations.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def reservations_ls(ctx: click.Context, as_json: bool) -> None:
    """Every reservation: key, task, owner (execution/node), seconds until it expires."""
    async with opened(ctx) as runtime:
        listed = await (await runtime.open_catalog()).list_reservations()
        async with runtime.store.read() as repos:
            tasks = {
                info.reservation.owner_id: await _task_of(repos, info.reservation.owner_id)
                for info in listed
            }
    rows = [
        {
            "key": i.reservation.key,
            "task": tasks[i.reservation.owner_id],
            "owner": i.reservation.owner_id,
            "expires_in": round(i.expires_in, 1),
        }
        for i in listed
    ]
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("key", "task", "owner", "expires in"):
        table.add_column(column, overflow="fold")
    for info in listed:
        expires, owner = info.expires_in, info.reservation.owner_id
        table.add_row(
            info.reservation.key[:16],
            tasks[owner],
            owner,
            f"{expires:.1f}s" if expires >= 0 else f"expired {-expires:.1f}s ago",
        )
    Console().print(table)


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


COMMANDS = [cache, reservations]
