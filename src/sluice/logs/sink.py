"""The engine's task log service: hands out one AttemptLog per attempt (the same object to
every plugin call of that attempt) and flushes them all in the background.

One flush, every `flush_interval` seconds (an attempt's end waits for the next one, so that
flushes batch many attempts in one transaction rather than one each): the buffered lines
of every attempt are placed in segments, written to the log store in a worker thread (fsspec
is blocking; the event loop never waits on it), and the index rows they touched are saved in
one database transaction. A log store that fails is logged once per outage and the lines of
that flush are lost (the index still counts them); index rows that could not be saved are
saved at the next flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sluice.clock import Clock
from sluice.config import LogsConfig
from sluice.errors import SluiceError
from sluice.logs import index
from sluice.logs.attempt import AttemptLog, Limits, SegmentPlan, SegmentState, Tap, plan_flush
from sluice.logs.files import LogFiles
from sluice.logs.index import AttemptKey, Segment
from sluice.logs.lines import LogLine
from sluice.store.database import Database

log = logging.getLogger(__name__)


@dataclass
class _Attempt:
    writer: AttemptLog
    state: SegmentState | None = None
    ended_at: float | None = None


class TaskLogSink:
    def __init__(
        self, files: LogFiles, db: Database, clock: Clock, config: LogsConfig, writer_id: str
    ) -> None:
        self.files = files
        self._db = db
        self._clock = clock
        self._config = config
        self._limits = Limits(
            config.segment_bytes, config.max_bytes_per_attempt, files.appendable, writer_id
        )
        self._attempts: dict[AttemptKey, _Attempt] = {}
        self._unsaved: dict[tuple[AttemptKey, int], Segment] = {}
        self._listeners: list[Tap] = []
        self._lock = asyncio.Lock()
        self._loop: asyncio.Task[None] | None = None
        self._failing = False

    def writer(self, execution_id: str, node_id: str, attempt: int) -> AttemptLog:
        """This attempt's writer: the same one until `end`."""
        key = AttemptKey(execution_id, node_id, attempt)
        entry = self._attempts.get(key)
        if entry is None:
            pending = max(4 * self._config.segment_bytes, 1024 * 1024)
            entry = _Attempt(AttemptLog(key, self._clock, pending, self._tap))
            self._attempts[key] = entry
        elif entry.ended_at is not None:  # the attempt goes on after all (started afresh)
            entry.ended_at = None
        entry.writer.ended = not self._config.enabled
        return entry.writer

    def end(self, execution_id: str, node_id: str, attempt: int) -> None:
        """The attempt is over: flush what it wrote and close its segment, soon. Idempotent."""
        key = AttemptKey(execution_id, node_id, attempt)
        entry = self._attempts.get(key)
        if entry is None or entry.ended_at is not None:
            return
        if entry.state is None and not entry.writer.pending and not entry.writer.dropped:
            entry.writer.ended = True  # it never wrote: nothing to store or close
            del self._attempts[key]
            return
        entry.ended_at = self._clock.now()  # closed at the next flush (flush_interval)

    def listen(self, listener: Tap) -> Callable[[], None]:
        """Call `listener` with every line as it is written (live output); returns the
        function that stops it. A listener must not block."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _tap(self, key: AttemptKey, line: LogLine) -> None:
        for listener in list(self._listeners):
            try:
                listener(key, line)
            except Exception:
                log.warning("a task log listener failed", exc_info=True)

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.create_task(self._run(), name="sluice-task-logs")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._config.flush_interval)
            try:
                await self.flush()
            except Exception as exc:  # logged, retried at the next flush
                log.warning("task logs: flush failed: %s", exc)

    async def flush(self) -> None:
        """Write every attempt's buffered lines and save the index rows they touched."""
        async with self._lock:
            busy = [(k, a) for k, a in self._attempts.items() if a.writer.pending or a.ended_at]
            if busy:
                await self._open([(k, a) for k, a in busy if a.state is None])
                plans = [(key, self._plan(key, entry)) for key, entry in busy]
                await self._apply(plans)
            await self._save()

    async def _open(self, fresh: list[tuple[AttemptKey, _Attempt]]) -> None:
        if not fresh:
            return
        now = self._clock.now()
        async with self._db.read() as conn:
            for key, entry in fresh:
                rows = await index.segments(conn, key.execution_id, key.node_id, key.attempt)
                entry.state, changed = SegmentState.resume(key, rows, now)
                self._unsaved.update({(key, s.segment): s for s in changed})

    def _plan(self, key: AttemptKey, entry: _Attempt) -> SegmentPlan:
        assert entry.state is not None
        lines, dropped = entry.writer.take()
        if entry.ended_at is not None:
            entry.writer.ended = True
            del self._attempts[key]
        locate = self._locator(key)
        return plan_flush(entry.state, lines, dropped, locate, self._limits, entry.ended_at)

    def _locator(self, key: AttemptKey) -> Callable[[int], tuple[str, str]]:
        def locate(number: int) -> tuple[str, str]:
            path = self.files.segment_path(key.execution_id, key.node_id, key.attempt, number)
            return path, self.files.uri(path)

        return locate

    async def _apply(self, plans: list[tuple[AttemptKey, SegmentPlan]]) -> None:
        try:
            await asyncio.to_thread(self._write_files, [plan for _, plan in plans])
            self._recovered()
        except Exception as exc:  # those lines are lost; the index still counts them
            self._failed(exc)
        for key, plan in plans:
            self._unsaved.update({(key, n): row for n, row in plan.rows.items()})

    def _write_files(self, plans: list[SegmentPlan]) -> None:
        for plan in plans:
            for write in plan.writes:
                self.files.write(write.path, write.new, write.whole)
            for uri in plan.removals:
                self.files.remove(uri)

    async def _save(self) -> None:
        if not self._unsaved:
            return
        rows = list(self._unsaved.values())
        try:
            async with self._db.begin() as conn:
                await index.save(conn, rows)
        except SluiceError as exc:
            log.warning("task logs: the index could not be saved (retried): %s", exc)
            return
        for row in rows:
            if self._unsaved.get((row.key, row.segment)) is row:
                del self._unsaved[(row.key, row.segment)]

    def _failed(self, exc: BaseException) -> None:
        if not self._failing:
            log.warning("task logs: the log store %s failed: %s", self.files.root, exc)
        self._failing = True

    def _recovered(self) -> None:
        if self._failing:
            log.warning("task logs: the log store %s is back", self.files.root)
        self._failing = False

    async def close(self) -> None:
        """End every attempt still open, flush, and stop the background loop."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        for key in list(self._attempts):
            self.end(key.execution_id, key.node_id, key.attempt)
        with contextlib.suppress(Exception):
            await self.flush()
