"""The thundering herd's workflow: a serializable cached task whose body records what really
happened (start/end lines with its pid and its engine's pid, one O_APPEND write each) and
holds while a file exists. Loaded from this file by `sluice run` processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import sluice


def record(directory: str, event: str) -> None:
    line = {"ev": event, "t": time.time(), "pid": os.getpid(), "engine": os.getppid()}
    fd = os.open(Path(directory) / "expensive.history", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@sluice.task(cache=sluice.Cache(version="1", serialize=True))
def expensive(directory: str, x: int) -> int:
    record(directory, "start")
    while (Path(directory) / "hold").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    record(directory, "end")
    return x * 2


@sluice.workflow
def herd(directory: str, x: int = 21) -> int:
    return expensive(directory=directory, x=x)
