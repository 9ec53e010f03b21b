"""Tasks for bench/ui_latency.py, in their own module so worker processes import them."""

from __future__ import annotations

import time

import sluice


@sluice.task
def pause(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i + 1
