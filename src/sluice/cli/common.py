"""What every command shares: options, the runtime, errors to exit codes, JSON output.

Exit codes: 0 success; 1 the execution did not succeed (or `executions abort --timeout` ran out
while it was still ABORTING); 2 bad input (usage, unknown target, bad value, bad config, a file
that is not a database, a missing SQLite file for a read-only command, a cache key or task name
matching nothing or several); 3 the execution was SKIPPED by a
concurrency policy; 4 the database cannot be reached or fails I/O (StoreUnavailableError:
connection refused or lost, SQLite "disk I/O error"), or is gone (StoreGoneError: dropped,
its file removed or replaced; `sluice engine` exits so after a bounded retry), or a backend
cannot be reached or its driver is missing; 130 interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sluice.errors import (
    BackendUnavailableError,
    MissingDependencyError,
    SluiceError,
    StoreUnavailableError,
)

if TYPE_CHECKING:
    from sluice.config import Settings
    from sluice.service import Sluice

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SKIPPED, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 1, 2, 3, 4, 130
T = TypeVar("T")


@dataclass
class CliState:
    config_path: str | None
    overrides: dict[str, Any]
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from sluice.config import load_config

            self._settings = load_config(self.config_path, **self.overrides)
        return self._settings


def exit_code_for(error: SluiceError) -> int:
    if isinstance(error, StoreUnavailableError | BackendUnavailableError | MissingDependencyError):
        return EXIT_UNAVAILABLE
    return EXIT_BAD_INPUT


def fail(message: str, code: int) -> None:
    """One line on stderr; the message is escaped, so `pip install 'sluice[redis]'` and other
    bracketed text print as written, never read as rich markup."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(
        f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True
    )
    sys.exit(code)


def run_async(command: Callable[..., Coroutine[Any, Any, int | None]]) -> Callable[..., None]:
    """Run an async command; a SluiceError becomes one line on stderr and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = asyncio.run(command(*args, **kwargs))
        except SluiceError as exc:
            fail(str(exc), exit_code_for(exc))
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        sys.exit(code or 0)

    return wrapper


@contextlib.asynccontextmanager
async def opened(ctx: click.Context, role: str = "cli") -> AsyncIterator[Sluice]:
    """The service on the configured store for one command, closed when the command ends."""
    from sluice.service import Sluice

    async with await Sluice.open(state(ctx).settings, role=role) as service:
        yield service


def state(ctx: click.Context) -> CliState:
    found = ctx.find_object(CliState)
    assert found is not None
    return found


def iso(when: float | datetime | None) -> str:
    """A time as `YYYY-MM-DD HH:MM:SS` (UTC) for tables; "" for None."""
    if when is None:
        return ""
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(when, UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def print_json(value: Any) -> None:
    """JSON on stdout: service views as the HTTP API serializes them (ISO-8601 UTC times)."""
    click.echo(json.dumps(_jsonable(value), indent=2, sort_keys=True, default=str))


def _jsonable(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
