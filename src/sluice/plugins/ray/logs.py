"""A job's log, forwarded to the task's log a piece at a time: each poll reads the whole log
(the Jobs API has no offset) and writes only the complete lines past the offset kept in the
plugin state, so a restarted engine goes on where the last persisted poll stopped."""

from __future__ import annotations

from sluice.plugins.core.context import TaskLogWriter
from sluice.plugins.ray.protocol import RESULT_MARKER

TAIL_LINES = 20


def forward_new_lines(writer: TaskLogWriter, log: str, offset: int, final: bool) -> int:
    """Write the lines of `log` past `offset` (all of them when `final`, else up to the last
    newline) without the runner's result line; return the new offset."""
    end = len(log) if final else log.rfind("\n", offset) + 1
    if end <= offset:
        return offset
    lines = [_without_result(line) for line in log[offset:end].splitlines(keepends=True)]
    text = "".join(line for line in lines if line)
    if text:
        writer.write(text, "stdout")
    return end


def _without_result(line: str) -> str:
    before, marker, _ = line.partition(RESULT_MARKER)
    return before + "\n" if marker and before else ("" if marker else line)


def log_tail(log: str) -> str:
    """The last lines of a job's log, to explain a failure."""
    return "\n".join(log.splitlines()[-TAIL_LINES:])
