"""The `sluice` command group."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from sluice.cli.common import CliState
from sluice.store.database import existing_database_only


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "config_path", metavar="PATH", help="TOML config file (or SLUICE_CONFIG)."
)
@click.option(
    "--db",
    "database_url",
    metavar="URL",
    help="Database URL, or a SQLite file path (or SLUICE_DATABASE_URL).",
)
@click.option("--project", help="Project (or SLUICE_PROJECT).")
@click.option("--domain", help="Domain (or SLUICE_DOMAIN).")
@click.version_option(package_name="sluice")
@click.pass_context
def cli(
    ctx: click.Context,
    config_path: str | None,
    database_url: str | None,
    project: str | None,
    domain: str | None,
) -> None:
    """sluice: run workflows of tasks with quotas, concurrency limits and cache reservations."""
    overrides: dict[str, Any] = {
        k: v
        for k, v in {"database_url": database_url, "project": project, "domain": domain}.items()
        if v
    }
    ctx.obj = CliState(config_path, overrides)


def _register() -> None:
    from sluice.cli import (
        admin,
        cache,
        concurrency,
        create,
        executions,
        launchplans,
        quota,
        run,
        serve,
        tokens,
    )

    cli.add_command(run.run_command)
    cli.add_command(executions.executions)
    executions.executions.add_command(create.create)
    for command in [*admin.COMMANDS, *cache.COMMANDS, *quota.COMMANDS]:
        cli.add_command(command)
    cli.add_command(serve.serve_command)
    cli.add_command(serve.ui_command)
    cli.add_command(tokens.tokens)
    cli.add_command(launchplans.launchplan)
    cli.add_command(concurrency.concurrency)


READ_ONLY = [
    ("executions", "ls"),
    ("executions", "show"),
    ("quota", "ls"),
    ("cache", "ls"),
    ("reservations", "ls"),
    ("locks", "ls"),
    ("launchplan", "ls"),
    ("concurrency", "status"),
    ("concurrency", "caps", "ls"),
]
"""Commands that only read: on a SQLite file that does not exist they fail (exit 2, naming
the path) instead of creating it, its directories and an empty schema to list. `plugins ls`
is not one of them: it lists what is installed, not what is stored, so it answers on a
machine with no store yet (loading plugins opens the store as an engine would)."""


def _existing_database_only(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with existing_database_only():
            return callback(*args, **kwargs)

    return wrapper


def _mark_read_only() -> None:
    for path in READ_ONLY:
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        assert command.callback is not None
        command.callback = _existing_database_only(command.callback)


_register()
_mark_read_only()


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="sluice", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    return 0
