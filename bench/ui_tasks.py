"""Tasks for bench/ui_latency.py, in their own module so worker processes import them."""

from __future__ import annotations

import time

import sluice


@sluice.task
def pause(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i + 1


@sluice.task
def stamper(lines: int, interval: float) -> int:
    """Prints `STAMP <wall time>` every `interval` seconds: how late a line reaches a browser."""
    for _ in range(lines):
        print(f"STAMP {time.time():.6f}", flush=True)
        time.sleep(interval)
    return lines


@sluice.task
def item(i: int) -> int:
    return i
