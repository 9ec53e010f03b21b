"""The mixed workload of the nemesis tests as python tasks: their bodies run in the engine's
local worker pool (sluice.plugins.builtin.worker), the processes a fenced engine's watchdog
ends, so a body's pid is its worker's pid and one worker runs many bodies in turn.

Each body appends a `start` and an `end` record (one O_APPEND write each) to the history file:
time, execution, node, attempt, pid, engine (the worker's parent) and what it holds (quota,
lock and cache tags, the same `q:`/`l:`/`c:` tags as the probe's). A task function does not
see its execution, node or attempt, so the body reads them from the worker's job (the `id`,
"EXECUTION/NODE/ATTEMPT", of the `job` being run, found up the call stack); it fails loudly if
the worker changed so that it cannot. The body's clock is corrected by NEMESIS_CLOCK_OFFSET
(the skew libfaketime gives its engine, which the harness sets beside it), so that every
record is on the test's clock.

Loaded from this file by the tests, the engine processes and the workers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import sluice

QUOTA = "faults-q"  # quota 1 (config of every runtime of these tests)
PAIR = "faults-pair"  # quota 2
OFFSET_ENV = "NEMESIS_CLOCK_OFFSET"  # hosts.py sets it beside libfaketime


def _job_identity() -> tuple[str, str, int]:
    """(execution, node, attempt) of the job this worker runs: the `job` dict of the worker's
    run_job frame (its id is the plugin's "EXECUTION/NODE/ATTEMPT")."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        job = frame.f_locals.get("job")
        if isinstance(job, dict) and isinstance(job.get("id"), str) and "inputs" in job:
            execution, node, attempt = job["id"].rsplit("/", 2)
            return execution, node, int(attempt)
        frame = frame.f_back
    raise RuntimeError("the nemesis body found no worker job up its stack: harness broken")


def now() -> float:
    """Wall-clock time on the test's clock (this process's skew taken off)."""
    return time.time() - float(os.environ.get(OFFSET_ENV, "0"))


def record(path: str, **fields: object) -> None:
    line = (json.dumps(fields, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def body(history: str, tags: list[str], seconds: float, fails: int, hold: str = "") -> int:
    """Record a start, run `seconds` (and while the file `hold` exists), record an end; the
    first `fails` attempts fail (retryably)."""
    execution, node, attempt = _job_identity()
    common = {
        "ex": execution,
        "node": node,
        "attempt": attempt,
        "pid": os.getpid(),
        "engine": os.getppid(),
        "tags": tags,
    }
    record(history, ev="start", t=now(), **common)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or (hold and Path(hold).exists()):
        time.sleep(0.02)
    failed = attempt < fails
    record(history, ev="end", t=now(), ok=not failed, **common)
    if failed:
        raise RuntimeError("the body failed on purpose")
    return 42


@sluice.task(quotas=[sluice.Quota(QUOTA)])
def held(history: str, seconds: float, fails: int, hold: str) -> int:
    return body(history, [f"q:{QUOTA}"], seconds, fails, hold)


@sluice.task(quotas=[sluice.Quota(PAIR)], retries=3)
def paired(history: str, seconds: float, fails: int, hold: str) -> int:
    return body(history, [f"q:{PAIR}"], seconds, fails, hold)


@sluice.task(cache=sluice.Cache(version="1", serialize=True))
def computed(history: str, seconds: float, fails: int, hold: str) -> int:
    # Its cache key is its inputs: only `seconds` differs between the keys of one history.
    return body(history, [f"c:{seconds!r}"], seconds, fails, hold)


@sluice.task(locks="part/{p}", retries=3)
def locked(history: str, seconds: float, fails: int, hold: str, p: int) -> int:
    return body(history, [f"l:part/{p}"], seconds, fails, hold)


@sluice.task(retries=3)
def flaky(history: str, seconds: float, fails: int, hold: str) -> int:
    return body(history, [], seconds, fails, hold)


@sluice.workflow
def mixed(
    history: str, tag: int, p: int, cache_seconds: float, seconds: float = 0.4, hold: str = ""
) -> None:
    """One of everything: a retried failure, the quotas of 1 and 2, the cached task shared by
    the executions of a wave (`cache_seconds` is the wave's), a lock keyed by partition. The
    quota-1 task also runs while `hold` exists, so a test can keep one body alive across a
    fault."""
    flaky(history=history, seconds=seconds, fails=1, hold="")
    held(history=history, seconds=seconds, fails=0, hold=hold)
    paired(history=history, seconds=seconds, fails=1, hold="")
    computed(history=history, seconds=cache_seconds, fails=0, hold="")
    locked(history=history, seconds=seconds, fails=0, hold="", p=p)
