"""One log line as stored: when it was produced, on which stream, and its text.

A segment file holds JSON lines `{"t": seconds, "s": "stdout"|"stderr", "m": text}`: one
object per line of task output, so text with any characters (escapes, invalid UTF-8 made
readable) survives, and a reader never confuses a task's output with the format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, cast

from sluice.errors import InvalidArgumentError

Stream = Literal["stdout", "stderr"]
STREAMS: tuple[Stream, ...] = ("stdout", "stderr")
MAX_LINE_CHARS = 64 * 1024
"""A longer line is cut here (and says so): one runaway line must not fill a segment."""


@dataclass(frozen=True)
class LogLine:
    at: float
    stream: Stream
    text: str

    def encode(self) -> bytes:
        record = {"t": round(self.at, 6), "s": self.stream, "m": self.text}
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def decode(cls, raw: bytes) -> LogLine | None:
        """The line stored in `raw`, or None for a torn or foreign line (a crash mid-write)."""
        try:
            record = json.loads(raw)
            stream = record["s"] if record["s"] in STREAMS else "stdout"
            return cls(float(record["t"]), cast(Stream, stream), str(record["m"]))
        except (ValueError, KeyError, TypeError):
            return None


def split_text(text: str) -> list[str]:
    """The lines of `text`: a trailing newline ends the last line rather than adding an empty
    one; a carriage return alone (a progress bar) does not split."""
    if not text:
        return []
    lines = text.removesuffix("\n").split("\n")
    return [_cut(line.removesuffix("\r")) for line in lines]


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]} [... {len(line) - MAX_LINE_CHARS} more characters cut]"


def check_stream(stream: str | None) -> Stream | None:
    if stream is None:
        return None
    if stream in STREAMS:
        return stream
    raise InvalidArgumentError(f"stream must be one of {', '.join(STREAMS)}, got {stream!r}")


@dataclass(frozen=True, order=True)
class Position:
    """Where a line is in one node's log: attempt, segment, index of the line in the segment.
    Shown as `attempt:segment:line`; a reader resumes `after` one."""

    attempt: int
    segment: int
    line: int

    def __str__(self) -> str:
        return f"{self.attempt}:{self.segment}:{self.line}"

    @classmethod
    def parse(cls, text: str) -> Position:
        parts = text.split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise InvalidArgumentError(
                f"a log position is attempt:segment:line (three numbers), got {text!r}"
            )
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))
