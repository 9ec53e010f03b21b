"""Server processes a plugin starts on this machine and owns (a local Ray or Dask cluster):
started in their own session, tied to the starting thread's life, stopped by process id.

Never stopped by name (`ray stop`, pkill): other clusters on the machine are not ours."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _die_with_starter() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_owned(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `command` in its own session (a Ctrl-C of the terminal is the engine's to handle),
    output to `log`. On Linux it gets SIGTERM when the starting thread dies, so a SIGKILLed
    engine leaves nothing behind: start it from the thread that lives as long as the owner."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_starter,
        )


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_owned(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM (the server stops its own children), then after `grace` seconds SIGKILL for it
    and any of its descendants still alive. Blocks up to `grace` seconds."""
    family = descendants(process.pid)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    for pid in [process.pid, *family]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def log_tail(path: Path, size: int = 2000) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return text[-size:].strip() or "(no output)"
