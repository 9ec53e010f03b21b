"""The `sluice` command group.

Commands are imported when they run, not when the group is built: `sluice --help` lists
them from the table below without importing the store, SQLAlchemy or the engine.
"""

from __future__ import annotations

import functools
import gc
import importlib
from collections.abc import Callable
from typing import Any

import click

from sluice.cli.common import CliState

COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "sluice.cli.run",
        "run_command",
        "Run a workflow, launch plan or task here, live.",
    ),
    "executions": (
        "sluice.cli.executions",
        "executions",
        "List, inspect, abort and create executions.",
    ),
    "launchplan": (
        "sluice.cli.launchplans",
        "launchplan",
        "Launch plan versions, policies and schedules.",
    ),
    "quota": (
        "sluice.cli.quota",
        "quota",
        "Resource quotas: tokens of named resources tasks claim.",
    ),
    "ratelimit": (
        "sluice.cli.ratelimit",
        "ratelimit",
        "Keyed rate limits: N calls per second, minute or hour, per key.",
    ),
    "locks": (
        "sluice.cli.quota",
        "locks",
        "Lock names tasks hold exclusively.",
    ),
    "cache": (
        "sluice.cli.cache",
        "cache",
        "Cached task outputs.",
    ),
    "reservations": (
        "sluice.cli.cache",
        "reservations",
        "Cache reservations: who computes what.",
    ),
    "concurrency": (
        "sluice.cli.concurrency",
        "concurrency",
        "Platform caps and the controller.",
    ),
    "logs": (
        "sluice.cli.logs",
        "logs_command",
        "What tasks printed: an execution's, a node's or one attempt's log.",
    ),
    "plugins": (
        "sluice.cli.admin",
        "plugins",
        "Task plugins.",
    ),
    "db": (
        "sluice.cli.admin",
        "db",
        "The state database.",
    ),
    "engine": (
        "sluice.cli.admin",
        "engine_command",
        "Run an engine until SIGINT or SIGTERM.",
    ),
    "serve": (
        "sluice.cli.serve",
        "serve_command",
        "Run the controller, the schedules, an engine, the API and UI.",
    ),
    "ui": (
        "sluice.cli.serve",
        "ui_command",
        "Serve the web UI and API over this machine's store.",
    ),
    "flyte": (
        "sluice.cli.flyte",
        "flyte",
        "Flyte projects: import `pyflyte package` output.",
    ),
    "tokens": (
        "sluice.cli.tokens",
        "tokens",
        "API tokens: create, list, revoke.",
    ),
    "backfill": (
        "sluice.cli.backfills",
        "backfill",
        "Backfills of scheduled launch plans: progress, pause, resume, cancel.",
    ),
}
"""Each command: the module and attribute defining it, and its one-line help."""

READ_ONLY = [
    ("executions", "ls"),
    ("executions", "show"),
    ("quota", "ls"),
    ("ratelimit", "ls"),
    ("cache", "ls"),
    ("reservations", "ls"),
    ("locks", "ls"),
    ("launchplan", "ls"),
    ("concurrency", "status"),
    ("concurrency", "caps", "ls"),
    ("logs",),
    ("backfill", "ls"),
    ("backfill", "show"),
]
"""Commands that only read: on a SQLite file that does not exist they fail (exit 2, naming
the path) instead of creating it, its directories and an empty schema to list. `plugins ls`
is not one of them: it lists what is installed, not what is stored, so it answers on a
machine with no store yet (loading plugins opens the store as an engine would)."""


class LazyGroup(click.Group):
    """A group whose commands come from COMMANDS, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            from sluice.store.async_package import defer_asyncio_orm

            defer_asyncio_orm()  # every command opens a store: its engine, not the ORM
            command = _import_uncollected(module, attribute)
            _add_subcommands(cmd_name, command)
            _mark_read_only(cmd_name, command)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] == "run" and not set(HELP_OPTIONS).intersection(args[1:]):
            _start_early_worker(ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


HELP_OPTIONS = ("-h", "--help")


@click.group(cls=LazyGroup, context_settings={"help_option_names": list(HELP_OPTIONS)})
@click.option(
    "--config", "config_path", metavar="PATH", help="TOML config file (or SLUICE_CONFIG)."
)
@click.option(
    "--db",
    "database_url",
    metavar="URL",
    callback=lambda _ctx, _param, value: database_url_of(value),
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


def database_url_of(value: str | None) -> str | None:
    """`--db` as a URL: anything without a scheme (`s.db`, `data/s.db`) is a SQLite file."""
    if value is None or "://" in value:
        return value
    return f"sqlite:///{value}"


def _import_uncollected(module: str, attribute: str) -> Any:
    """Import a command with the garbage collector off: imports make few cycles, and the
    collections they set off (walking every SQLAlchemy and pydantic object made so far) were
    about 10% of a command's import time. What the command imported then lives as long as the
    process, so it is frozen: collections during the command (a run's engine) no longer walk
    it, 3-5% of a fan-out's CPU."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return getattr(importlib.import_module(module), attribute)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _start_early_worker(ctx: click.Context) -> None:
    """Start the local pool's first worker before `run` imports the engine, so that the
    two start-ups overlap (see early_worker); it is killed when the command ends if no pool
    took it."""
    from sluice.plugins.builtin import early_worker

    early_worker.start_early_worker()
    ctx.call_on_close(early_worker.discard_early_worker)


def _add_subcommands(name: str, command: click.Command) -> None:
    if name == "executions":  # `executions create` and `signal` live apart from ls/show/abort
        from sluice.cli.create import create
        from sluice.cli.signals import signal

        assert isinstance(command, click.Group)
        command.add_command(create)
        command.add_command(signal)
    if name == "launchplan":  # `launchplan backfill` lives with the other backfill commands
        from sluice.cli.backfills import backfill_command

        assert isinstance(command, click.Group)
        command.add_command(backfill_command)


def _existing_database_only(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from sluice.store.database import existing_database_only

        with existing_database_only():
            return callback(*args, **kwargs)

    return wrapper


def _mark_read_only(name: str, command: click.Command) -> None:
    for path in READ_ONLY:
        if path[0] != name:
            continue
        found = command
        for part in path[1:]:
            assert isinstance(found, click.Group)
            found = found.commands[part]
        assert found.callback is not None
        found.callback = _existing_database_only(found.callback)


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="sluice", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    finally:
        # The command is over (its store and workers closed): the interpreter's final
        # collection over every object imported (SQLAlchemy, pydantic) took 0.12-0.14 s of
        # a one-task `sluice run`; frozen objects are left to the process's exit.
        gc.freeze()
    return 0
