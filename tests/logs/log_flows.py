"""Workflows whose tasks print, for the task log tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import sluice


@sluice.task
def chatty(n: int) -> int:
    print(f"hello from chatty {n}")
    print(f"warning on stderr {n}", file=sys.stderr)
    os.write(1, f"fd-level write {n}\n".encode())
    subprocess.run(["/bin/sh", "-c", f"echo from a subprocess {n}"], check=True)
    print("no newline at the end", end="")
    return n


@sluice.workflow
def chatty_flow() -> int:
    return chatty(n=1)


@sluice.task
def broken() -> int:
    print("about to fail", file=sys.stderr)
    print("the config file is missing", file=sys.stderr)
    raise RuntimeError("cannot go on")


@sluice.workflow
def broken_flow() -> int:
    return broken()


@sluice.task
def slow_printer(lines: int, pause: float) -> int:
    for i in range(lines):
        print(f"line {i}", flush=True)
        time.sleep(pause)
    return lines


@sluice.workflow
def slow_flow(lines: int = 5, pause: float = 0.05) -> int:
    return slow_printer(lines=lines, pause=pause)


@sluice.task
def quiet(x: int) -> int:
    return x


@sluice.task
def loud(x: int) -> int:
    for i in range(20):
        print(f"task {x} line {i}")
    return x


@sluice.workflow
def fan_out(width: int = 8, printing: bool = True) -> int:
    return len([(loud(x=i) if printing else quiet(x=i)) for i in range(width)])


@sluice.task(retries=1)
def print_until_unblocked(directory: str) -> int:
    """Prints a tick every 50 ms while `directory/block` exists (the crash test kills its
    engine meanwhile), then says it is done."""
    print(f"started in process {os.getpid()}", flush=True)
    ticks = 0
    while os.path.exists(os.path.join(directory, "block")):
        print(f"tick {ticks}", flush=True)
        ticks += 1
        time.sleep(0.05)
    print("done", flush=True)
    return ticks


@sluice.workflow
def crash_flow(directory: str) -> int:
    return print_until_unblocked(directory=directory)
