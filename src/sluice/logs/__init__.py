"""Task logs: what every attempt of every task printed, kept in a log store chosen by URL
(fsspec) with an index in the database. The engine writes through TaskLogSink; `sluice logs`,
the API and the UI read through LogReader. See docs/logs.md."""

from __future__ import annotations

from sluice.logs.files import LogFiles, log_store_url
from sluice.logs.index import AttemptKey, Segment
from sluice.logs.lines import LogLine, Position, Stream
from sluice.logs.sink import TaskLogSink

__all__ = [
    "AttemptKey",
    "LogFiles",
    "LogLine",
    "Position",
    "Segment",
    "Stream",
    "TaskLogSink",
    "log_store_url",
]
