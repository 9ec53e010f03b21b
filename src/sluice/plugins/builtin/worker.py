"""The worker side of the local pool: `python -m sluice.plugins.builtin.worker JOBFD RESULTFD
PARENTPID MARKER`. Reads one JSON job per line, runs the task, writes one JSON answer per line.

Its stdout and stderr are pipes the pool reads as the job's log. They are line-buffered, so a
task's lines reach its log (and `sluice run`) as they are printed; after each job every buffer
(Python's and C's stdio) is flushed and MARKER is written, before the answer, on each of the
two pipes the pool has not drained yet (FIONREAD); the answer's "markers" names them.

A job is {"id", "module", "file", "qualname", "inputs"} (or a flytekit task: see
flyte_exec); an answer is {"id", "outputs"} or
{"id", "error": {"type", "message", "traceback"}}. JSON only: nothing is unpickled. The worker
dies with its parent (PR_SET_PDEATHSIG on Linux), so a SIGKILLed engine leaves no orphans.

Fencing (sluice/fencing.py): a job may name the file holding its engine's lease deadline
("fence"). A watchdog thread then ends this process (exit FENCED_EXIT, a line on stderr) if the
deadline passes while a body runs, so a body never outlives its engine's right to run it, even
when the engine is frozen or cut off; a job that arrives past the deadline is answered
{"id", "fenced": true} without running.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import fcntl
import functools
import gc
import json
import os
import signal
import sys
import termios
import traceback
from typing import Any

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        sys.exit(0)


FENCING_TOKEN_ENV = "SLUICE_FENCING_TOKEN"
"""Where a task body finds its fencing token (sluice.current_fencing_token)."""


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from sluice.errors import OutputsError
    from sluice.modules import load_module, resolve_attribute

    os.environ[FENCING_TOKEN_ENV] = str(job.get("fencing_token", ""))
    try:
        if job.get("runner") == "flyte":  # a flytekit task template (the `flyte` plugin)
            from sluice.plugins.builtin.flyte_exec import run_flyte_job

            return run_flyte_job(job)
        module = load_module(job["module"], job.get("file", ""))
        task = resolve_attribute(module, job["qualname"])
        runner = getattr(task, "execute_json", None)
        if runner is None:
            raise TypeError(f"{job['qualname']!r} in {job['module']!r} is not a sluice task")
        return {"id": job["id"], "outputs": runner(job["inputs"])}
    except OutputsError as exc:
        return {
            "id": job["id"],
            "error": {"type": "OutputsError", "message": str(exc), "traceback": ""},
        }
    except BaseException as exc:
        return {
            "id": job["id"],
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "traceback": traceback.format_exc(),
            },
        }


@functools.cache
def _libc() -> Any:
    """This process's C library, opened once (dlopen costs tens of microseconds per job)."""
    return ctypes.CDLL(None)


def _unread(fd: int) -> int:
    """Bytes written on this pipe that the pool has not read yet (all of them: unknown)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except OSError:
        return 1
    return count[0]


def _end_output(marker: bytes) -> list[str]:
    """Flush everything the job printed, then mark its end on each output pipe the pool has
    not drained yet; returns those streams' names. A drained pipe needs no marker: the pool
    handles what it reads in the callback that reads it, so all of it reached the job."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
    with contextlib.suppress(Exception):
        _libc().fflush(None)  # C code's stdio buffers
    line = marker + b"\n"
    marked = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if _unread(fd):
            with contextlib.suppress(OSError):
                os.write(fd, line)
                marked.append(name)
    return marked


class _Fence:
    """The watchdog of the deadline file the jobs name, started with the first such job."""

    def __init__(self) -> None:
        self.watchdog: Any = None

    def watch(self, path: str | None) -> None:
        if path is None or (self.watchdog is not None and self.watchdog.path == path):
            return
        from sluice.fencing import Watchdog

        self.watchdog = Watchdog(path, _fenced)

    def expired(self) -> bool:
        return self.watchdog is not None and bool(self.watchdog.expired())

    @contextlib.contextmanager
    def body(self) -> Any:
        if self.watchdog is None:
            yield
            return
        self.watchdog.body_started()
        try:
            yield
        finally:
            self.watchdog.body_ended()


def _fenced() -> None:
    from sluice.fencing import FENCED_EXIT

    with contextlib.suppress(Exception):
        os.write(
            2,
            b"sluice: this task's engine could not show its leases alive in time: the"
            b" body is ended (fenced) and its attempt will start again\n",
        )
    os._exit(FENCED_EXIT)


def main(argv: list[str]) -> None:
    job_fd, result_fd, parent_pid = (int(a) for a in argv[:3])
    marker = argv[3].encode()
    _die_with_parent(parent_pid)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the engine's to handle
    gc.disable()  # imports make few cycles; the collections they set off cost ~10% of them
    import sluice.sdk.task  # noqa: F401 - every task module needs it: import before the first job

    gc.freeze()  # lives as long as the worker: tasks' collections need not walk it
    gc.enable()

    fence = _Fence()
    with os.fdopen(job_fd, "rb") as jobs, os.fdopen(result_fd, "wb", buffering=0) as results:
        for line in jobs:
            job = json.loads(line)
            fence.watch(job.get("fence"))
            if fence.expired():
                answer: dict[str, Any] = {"id": job["id"], "fenced": True}
            else:
                with fence.body():
                    answer = run_job(job)
            answer["markers"] = _end_output(marker)
            results.write(json.dumps(answer).encode() + b"\n")


if __name__ == "__main__":
    main(sys.argv[1:])
