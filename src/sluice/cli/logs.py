"""`sluice logs EXECUTION [NODE]`: what tasks printed, per attempt, from the log store."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click
from rich.console import Console
from rich.text import Text

from sluice.cli.common import opened, run_async
from sluice.service.logs import LogLineView


@click.command("logs")
@click.argument("execution_id", metavar="EXECUTION")
@click.argument("node_id", metavar="[NODE]", required=False)
@click.option("--attempt", type=int, help="Only this attempt of NODE (1 is the first).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until it ends.")
@click.option(
    "--stream", type=click.Choice(["stdout", "stderr"]), help="Only lines of this stream."
)
@click.option("--tail", type=int, metavar="N", help="Only the last N lines.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
@run_async
async def logs_command(
    ctx: click.Context,
    execution_id: str,
    node_id: str | None,
    attempt: int | None,
    follow: bool,
    stream: str | None,
    tail: int | None,
    as_json: bool,
) -> None:
    """What the tasks of EXECUTION (an id or a unique prefix) printed: every node's lines
    merged by time, prefixed with the node; or NODE's attempt by attempt, or one --attempt."""
    show = _printer(as_json, prefix=node_id is None)
    async with opened(ctx) as service:
        if follow:
            following = service.follow_logs(execution_id, node_id, attempt=attempt, stream=stream)
            async for line in following:
                show(line)
            return
        found = await service.logs(execution_id, node_id, attempt=attempt, stream=stream, tail=tail)
        for line in found:
            show(line)


def _printer(as_json: bool, prefix: bool) -> Callable[[LogLineView], None]:
    console = Console(highlight=False, soft_wrap=True)
    attempts: dict[str, int] = {}

    def show(line: LogLineView) -> None:
        if as_json:
            sys.stdout.write(line.model_dump_json() + "\n")
            sys.stdout.flush()
            return
        if attempts.get(line.node, line.attempt) != line.attempt and not prefix:
            console.print(Text(f"--- attempt {line.attempt}", style="bold"))
        attempts[line.node] = line.attempt
        console.print(render_line(line, prefix))

    return show


def render_line(line: LogLineView, prefix: bool) -> Text:
    """`node | text` (the node when several are shown); stderr in red, sluice's notes dim."""
    text = Text()
    if prefix:
        text.append(f"{line.node} | ", style="cyan")
    style = "dim italic" if line.note else ("red" if line.stream == "stderr" else "")
    text.append(line.text, style=style)
    return text
