"""A local pool worker started before the engine exists, for the pool to adopt.

`sluice run` starts one as its first act: the worker's interpreter start-up and imports
(0.15-0.2 s) then run on the other core while the command imports the engine, the store and
SQLAlchemy (0.4-0.5 s), instead of after them, on the way to the first task's answer. The
first worker a pool in this process starts is this one, if it is still alive; a worker no pool
took (a run that failed its checks, or ran no python task) is killed when the command ends.

The worker is started exactly as the pool starts its own (`WorkerProcess.spawn`): the same
interpreter, module, arguments, environment and pipes. This module imports nothing heavy: it
runs before the command's imports.

The hand-off is one slot per process: the command line and the pool that adopts its worker
are created far apart (the pool by a plugin the engine loads), and a process has one command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.plugins.builtin.worker_process import Finished, WorkerProcess

_STREAMS = ("result", "stdout", "stderr")


@dataclass
class _Started:
    popen: subprocess.Popen[bytes]
    job_fd: int
    """The write end of the worker's job pipe."""
    fds: dict[str, int]
    """The read ends of its result, stdout and stderr pipes."""
    marker: str

    def discard(self) -> None:
        for fd in (self.job_fd, *self.fds.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            self.popen.kill()
        with contextlib.suppress(Exception):
            self.popen.wait(timeout=5)


_slot: list[_Started] = []
"""The worker started and not adopted yet (at most one)."""


def job_end_marker() -> str:
    """A worker's marker of a job's end on its output pipes: random, per worker."""
    return f"\x1esluice-job-end-{secrets.token_hex(8)}\x1e"


def worker_command(job_read: int, result_write: int, marker: str) -> list[str]:
    """The command line of a pool worker (see worker.py)."""
    return [
        sys.executable,
        "-m",
        "sluice.plugins.builtin.worker",
        str(job_read),
        str(result_write),
        str(os.getpid()),
        marker,
    ]


def start_early_worker() -> None:
    """Start a worker now, for the first pool of this process to adopt. Does nothing if one
    is waiting already; a failure to start is left to the pool (it starts its own)."""
    if _slot:
        return
    job_read, job_write = os.pipe()
    ends = {name: os.pipe() for name in _STREAMS}
    marker = job_end_marker()
    try:
        popen = subprocess.Popen(
            worker_command(job_read, ends["result"][1], marker),
            pass_fds=(job_read, ends["result"][1]),
            stdin=subprocess.DEVNULL,
            stdout=ends["stdout"][1],
            stderr=ends["stderr"][1],
        )
    except OSError:
        for fd in (job_write, *(read for read, _ in ends.values())):
            os.close(fd)
        return
    finally:
        for fd in (job_read, *(write for _, write in ends.values())):
            os.close(fd)
    fds = {name: read for name, (read, _) in ends.items()}
    _slot.append(_Started(popen, job_write, fds, marker))


def discard_early_worker() -> None:
    """Kill the worker no pool adopted, if any (idempotent)."""
    while _slot:
        _slot.pop().discard()


def adopt_early_worker(finished: Finished) -> WorkerProcess | None:
    """The worker started early, now driven by the caller's pool; None if there is none or
    it died meanwhile (the pool then starts its own)."""
    from sluice.plugins.builtin.worker_process import WorkerProcess

    if not _slot:
        return None
    started = _slot.pop()
    if started.popen.poll() is not None:
        started.discard()
        return None
    for fd in (started.job_fd, *started.fds.values()):
        os.set_blocking(fd, False)
    return WorkerProcess(
        AdoptedProcess(started.popen),
        started.job_fd,
        started.fds,
        started.marker.encode(),
        finished,
    )


class AdoptedProcess:
    """A subprocess.Popen seen as the pool sees an asyncio subprocess: pid, returncode,
    kill() and an awaitable wait() (woken by a pidfd on Linux, no thread)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def kill(self) -> None:
        self._popen.kill()

    async def wait(self) -> int:
        code = self._popen.poll()
        if code is not None:
            return code
        try:
            pidfd = os.pidfd_open(self._popen.pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: a thread waits
            return await asyncio.to_thread(self._popen.wait)
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self._popen.wait()
