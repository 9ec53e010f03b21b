"""One worker process of the local pool and its four pipes, driven by event-loop callbacks.

The pool writes a job as one JSON line on the job pipe (non-blocking: a long line the worker
has not read yet waits in a buffer, flushed when the pipe has room). The worker answers with
one JSON line on the result pipe; its stdout and stderr are two more pipes, read line by line
for the running job. Every wake-up reads all three (the worker writes them back to back), so
a job costs one wake-up when it printed nothing. The job ends when its answer and the markers
the answer announces are read (see worker.py); a worker whose result pipe closes died.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from typing import Any, Protocol

from sluice.plugins.builtin.early_worker import worker_command

_OUTPUT_CHUNK = 64 * 1024
"""Bytes read at once from a worker's stdout or stderr; a longer line without a newline is
delivered in pieces this size."""
_RESULT_CHUNK = 1024 * 1024
_LIMIT = 256 * 1024 * 1024
"""Longest JSON line accepted from a worker."""
_MARKER_WAIT = 5.0
"""Seconds an answered job waits for its output markers (they were written before the answer,
so only a subprocess of the task holding the pipe full delays them)."""
_STREAMS = ("stdout", "stderr")


class ChildProcess(Protocol):
    """What the pool uses of a worker's process: an asyncio subprocess, or a worker started
    before the event loop (early_worker.AdoptedProcess)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...


class JobOutput(Protocol):
    def output(self, text: str, stream: str) -> None: ...


Finished = Callable[["WorkerProcess", Any, "dict[str, Any] | None", "int | None"], None]
"""(process, job, answer or None if the worker died, exit code if it died)."""


class WorkerProcess:
    def __init__(
        self,
        process: ChildProcess,
        job_fd: int,
        fds: dict[str, int],
        marker: bytes,
        finished: Finished,
    ) -> None:
        self.process = process
        self._job_fd = job_fd
        self._fds = fds
        self._marker = marker
        self._finished = finished
        self._partial = {name: b"" for name in fds}
        self._awaited: set[str] = set()
        """Output streams whose job-end marker the current job still waits for."""
        self._answer: dict[str, Any] | None = None
        self._unsent = b""
        self._timer: asyncio.TimerHandle | None = None
        self._death: asyncio.Task[None] | None = None
        self._outputs_done = asyncio.Event()
        self.job: Any = None
        self.job_id = ""
        self._loop = asyncio.get_running_loop()
        for fd in fds.values():
            self._loop.add_reader(fd, self._readable)

    @classmethod
    async def spawn(cls, marker: str, finished: Finished) -> WorkerProcess:
        job_read, job_write = os.pipe()
        ends = {name: os.pipe() for name in ("result", *_STREAMS)}
        child = (job_read, *(write for _, write in ends.values()))
        try:
            process = await asyncio.create_subprocess_exec(
                *worker_command(job_read, ends["result"][1], marker),
                pass_fds=(job_read, ends["result"][1]),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=ends["stdout"][1],
                stderr=ends["stderr"][1],
            )
        except BaseException:
            for fd in (job_write, *(read for read, _ in ends.values())):
                os.close(fd)
            raise
        finally:
            for fd in child:
                os.close(fd)
        fds = {name: read for name, (read, _) in ends.items()}
        for fd in (job_write, *fds.values()):
            os.set_blocking(fd, False)
        return cls(process, job_write, fds, marker.encode(), finished)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None and "result" in self._fds

    def run(self, job_id: str, payload: dict[str, Any], job: JobOutput) -> None:
        """Send one job (the worker is idle); `finished` is called when it ends."""
        self.job, self.job_id = job, job_id
        self._answer = None
        if "result" not in self._fds:  # died while idle: the job fails as it would running
            self._settle()
            return
        self._send(json.dumps({"id": job_id, **payload}).encode() + b"\n")

    def _send(self, data: bytes) -> None:
        if self._job_fd < 0:
            return
        try:
            written = os.write(self._job_fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            return  # the worker is gone: its result pipe's end reports it
        if written < len(data):
            self._unsent = data[written:]
            self._loop.add_writer(self._job_fd, self._flush)

    def _flush(self) -> None:
        data, self._unsent = self._unsent, b""
        self._loop.remove_writer(self._job_fd)
        self._send(data)

    def _readable(self) -> None:
        for name in list(self._fds):
            self._read(name)
        self._settle()

    def _read(self, name: str) -> None:
        fd = self._fds[name]
        try:
            data = os.read(fd, _RESULT_CHUNK if name == "result" else _OUTPUT_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._closed(name)
        elif name == "result":
            self._result(data)
        else:
            self._output(name, data)

    def _closed(self, name: str) -> None:
        fd = self._fds.pop(name)
        self._loop.remove_reader(fd)
        os.close(fd)
        if name != "result":
            self._flush_partial(name)
            self._awaited.discard(name)
            if not any(stream in self._fds for stream in _STREAMS):
                self._outputs_done.set()

    def _result(self, data: bytes) -> None:
        buffered = self._partial["result"] + data
        *lines, self._partial["result"] = buffered.split(b"\n")
        if len(self._partial["result"]) > _LIMIT:
            self.kill()  # a runaway answer: the job fails as a dead worker's
        for line in lines:
            try:
                answer: dict[str, Any] = json.loads(line)
            except ValueError:
                self.kill()  # not the worker's protocol: the job fails as a dead worker's
                return
            if answer.get("id") == self.job_id and self.job is not None:
                self._awaited = set(answer.pop("markers", _STREAMS)) & set(self._fds)
                self._answer = answer

    def _output(self, stream: str, data: bytes) -> None:
        *lines, partial = (self._partial[stream] + data).split(b"\n")
        if len(partial) >= _OUTPUT_CHUNK:
            lines.append(partial)
            partial = b""
        self._partial[stream] = partial
        for line in lines:
            self._line(line, stream)

    def _line(self, line: bytes, stream: str) -> None:
        before, marked, _ = line.partition(self._marker)
        if (before or not marked) and self.job is not None:
            self.job.output(before.decode(errors="replace"), stream)
        if marked:
            self._awaited.discard(stream)

    def _flush_partial(self, stream: str) -> None:
        partial, self._partial[stream] = self._partial[stream], b""
        if partial:
            self._line(partial, stream)

    def _settle(self) -> None:
        """End the current job if its answer and announced markers are in; notice a death."""
        if self.job is None:
            return  # idle (a dead idle worker is dropped by the pool: see `alive`)
        if self._answer is not None and not self._awaited:
            self._end(self._answer, None)
        elif self._answer is not None and self._timer is None:
            self._timer = self._loop.call_later(_MARKER_WAIT, self._markers_late)
        elif "result" not in self._fds and self._death is None:
            self._death = self._loop.create_task(self._died())

    def _markers_late(self) -> None:
        self._timer = None
        if self._answer is not None and self.job is not None:
            self._end(self._answer, None)

    async def _died(self) -> None:
        code = await self.process.wait()
        with contextlib.suppress(asyncio.TimeoutError):  # its last lines on stderr first
            await asyncio.wait_for(self._outputs_done.wait(), _MARKER_WAIT)
        if self.job is not None:
            self._end(None, code)

    def _end(self, answer: dict[str, Any] | None, code: int | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for stream in _STREAMS:
            if stream in self._fds:
                self._flush_partial(stream)
        job, self.job, self.job_id, self._answer = self.job, None, "", None
        self._finished(self, job, answer, code)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    def release(self) -> None:
        """Kill the worker and close its pipes (what a subprocess of its task still writes
        on them is dropped). Idempotent."""
        self.kill()
        if self._timer is not None:
            self._timer.cancel()
        for name in list(self._fds):
            self._closed(name)
        if self._job_fd >= 0:
            self._loop.remove_writer(self._job_fd)
            with contextlib.suppress(OSError):
                os.close(self._job_fd)
            self._job_fd = -1

    async def close(self) -> None:
        self.release()
        if self._death is not None and self._death is not asyncio.current_task():
            self._death.cancel()
        with contextlib.suppress(Exception):
            await self.process.wait()
