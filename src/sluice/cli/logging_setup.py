"""One logging set-up for the long-running commands (`serve`, `engine`, `run`, `ui`):
`--log-level` and `--log-format text|json`, one line per record on stderr.

Text lines read `2026-12-02T10:00:00.123Z INFO sluice.engine: engine e1 started`; JSON lines
are objects with `time` (ISO-8601 UTC), `level`, `logger`, `message` and, for an error with
a traceback, `exc_info` as text (expected conditions log no traceback: see store/health.py).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_HANDLER_NAME = "sluice-cli"


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(level: str, fmt: str) -> logging.Handler:
    """Route sluice's records at `level` and above (other libraries' at WARNING and above)
    to stderr in `fmt`; idempotent."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, logging.getLevelName(level)))  # libraries: warnings up
    logging.getLogger("sluice").setLevel(level)
    return handler


def logging_options(default_level: str) -> Callable[[F], F]:
    """`--log-level` and `--log-format` for a long-running command; the set-up is applied
    before the command runs."""

    def decorate(command: F) -> F:
        def apply(ctx: click.Context, _: click.Parameter, value: Any) -> Any:
            ctx.meta[f"sluice.{_.name}"] = value
            level = ctx.meta.get("sluice.log_level", default_level)
            fmt = ctx.meta.get("sluice.log_format", "text")
            configure(level, fmt)
            return value

        level = click.option(
            "--log-level",
            type=click.Choice(LEVELS, case_sensitive=False),
            default=default_level,
            show_default=True,
            callback=lambda ctx, p, v: apply(ctx, p, v.upper()),
            expose_value=False,
            help="Log records at this level and above, on stderr.",
        )
        fmt = click.option(
            "--log-format",
            type=click.Choice(("text", "json")),
            default="text",
            show_default=True,
            callback=apply,
            expose_value=False,
            help="One line of text, or one JSON object, per record.",
        )
        return level(fmt(command))

    return decorate
