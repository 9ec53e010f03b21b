"""A task body the probe plugin runs as a child process of the engine: it records what really
happened to the history file and dies with the engine, like a python worker.

python probe_body.py HISTORY EXECUTION NODE ATTEMPT SECONDS FAIL TAGS

Appends one JSON line `start` when it begins and one `end` when it is done (each with one
write to a file opened with O_APPEND, so lines of concurrent bodies never interleave), sleeps
SECONDS meanwhile (or while a file named by the HOLD environment variable exists), exits 3 if
FAIL is "1" (a failure the task retries), else prints 42 and exits 0. Stopped by SIGTERM (the
plugin's abort), it records an `end` with `aborted` first. TAGS (comma-separated
`q:NAMESPACE`, `l:LOCK`, `c:KEY`) say what the body holds, for the history checker.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the engine died before prctl took effect
        os._exit(9)


def record(path: str, **fields: object) -> None:
    line = (json.dumps(fields, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main() -> None:
    history, execution, node, attempt, seconds, fail, tags = sys.argv[1:8]
    engine = int(os.environ["PROBE_ENGINE_PID"])
    _die_with_parent(engine)
    common = {
        "ex": execution,
        "node": node,
        "attempt": int(attempt),
        "pid": os.getpid(),
        "engine": engine,
        "tags": [t for t in tags.split(",") if t],
    }
    record(history, ev="start", t=time.time(), **common)

    def stopped(*_: object) -> None:  # the engine aborts the attempt: a recorded end
        record(history, ev="end", t=time.time(), ok=False, aborted=True, **common)
        os._exit(143)

    signal.signal(signal.SIGTERM, stopped)
    hold = os.environ.get("HOLD")
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline or (hold and Path(hold).exists()):
        time.sleep(0.02)
    failed = fail == "1"
    record(history, ev="end", t=time.time(), ok=not failed, **common)
    if failed:
        sys.exit(3)
    print(42, flush=True)


if __name__ == "__main__":
    main()
