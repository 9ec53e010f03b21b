"""`sluice flyte import PACKAGE`: register a Flyte project's launch plans, workflows and tasks."""

from __future__ import annotations

import click

from sluice.cli.common import opened, print_json, run_async


@click.group("flyte")
def flyte() -> None:
    """Flyte projects (flytekit): run them on sluice with no Flyte cluster."""


@flyte.command("import")
@click.argument("package", type=click.Path(exists=True))
@click.option("--activate", is_flag=True, help="Make each launch plan version the ACTIVE one.")
@click.option(
    "--source-root",
    default="",
    help="The directory the task modules import from (default: the current directory).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@run_async
async def import_command(
    ctx: click.Context, package: str, activate: bool, source_root: str, as_json: bool
) -> None:
    """Register every launch plan of PACKAGE (a `pyflyte package` .tgz or a `pyflyte
    serialize` directory) with its workflow and tasks."""
    async with opened(ctx) as service:
        registered = await service.import_flyte(package, activate=activate, source_root=source_root)
    if as_json:
        print_json(registered)
        return
    for plan in registered:
        click.echo(f"launch plan {plan.name} version {plan.version} registered ({plan.state})")
