"""`sluice tokens create|ls|revoke`: bearer tokens of the HTTP API."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from sluice.cli.common import iso, opened, print_json, run_async


@click.group("tokens")
def tokens() -> None:
    """Bearer tokens of the HTTP API, each limited to some projects."""


@tokens.command("create")
@click.option("--project", "projects", multiple=True, required=True, help="Repeatable.")
@click.option("--read-only", is_flag=True, help="May read, never write.")
@click.option("--name", default="", help="What the token is for, shown by `tokens ls`.")
@click.pass_context
@run_async
async def tokens_create(
    ctx: click.Context, projects: tuple[str, ...], read_only: bool, name: str
) -> None:
    """Create a token and print it once: only its hash is stored."""
    async with opened(ctx) as service:
        issued = await service.tokens.create(projects, read_only=read_only, name=name)
    click.echo(issued.secret)
    what = "read-only" if read_only else "read-write"
    click.echo(
        f"token {issued.token.id}: {what} on {', '.join(issued.token.projects)}; "
        "it is shown only now",
        err=True,
    )


@tokens.command("ls")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def tokens_ls(ctx: click.Context, as_json: bool) -> None:
    """Every token (never its secret), revoked ones included."""
    async with opened(ctx) as service:
        listed = await service.tokens.list()
    if as_json:
        print_json(listed)
        return
    table = Table()
    for column in ("id", "name", "projects", "access", "created", "revoked"):
        table.add_column(column)
    for t in listed:
        revoked = iso(t.revoked_at)
        access = "read-only" if t.read_only else "read-write"
        created = iso(t.created_at)
        table.add_row(t.id, t.name, ", ".join(t.projects), access, created, revoked)
    Console().print(table)


@tokens.command("revoke")
@click.argument("token_id")
@click.pass_context
@run_async
async def tokens_revoke(ctx: click.Context, token_id: str) -> None:
    """Revoke a token: the next request that carries it is refused."""
    async with opened(ctx) as service:
        revoked = await service.tokens.revoke(token_id)
    click.echo(f"token {revoked.id} revoked")
