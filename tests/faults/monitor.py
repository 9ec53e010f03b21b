"""What really happened to the processes that ran task bodies: a thread that follows the history
file for the pids of started bodies and polls each one's /proc/PID/stat every few ms.

For each process (a pid and its start time in the kernel's ticks, so a reused pid is another
process) it keeps when it was last seen alive, when it was first seen dead (gone, or a zombie
its frozen parent has not reaped), and the intervals it was stopped (state T, as SIGSTOP
leaves it). Times are the test's wall clock, as the bodies' records (corrected for skew).

Judging on what is certain: a process is alive until `last_alive` (it may have died up to one
poll later), and frozen from the last time it was seen running to the first time it was seen
running again (it may have stopped a poll later and resumed a poll earlier): so a body's life
as the checker sees it is never longer than its real one, and an overlap it finds happened.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

INTERVAL = 0.01


@dataclass
class ProcessLife:
    pid: int
    ticks: str  # the kernel's start time of this process (field 22 of /proc/PID/stat)
    first_seen: float
    last_alive: float
    last_running: float
    dead_at: float | None = None  # first seen gone or a zombie
    stopped_since: float | None = None  # seen stopped now: frozen since its last run
    frozen: list[tuple[float, float]] = field(default_factory=list)

    @property
    def death(self) -> float | None:
        """The last instant it is known alive, if it died."""
        return None if self.dead_at is None else self.last_alive


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start ticks), or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], fields[19]


class PidMonitor:
    """Start it before the engines run bodies and stop it after they stopped; `lives(pid)`
    gives the processes a pid named, in order."""

    def __init__(self, history: Path, interval: float = INTERVAL) -> None:
        self.history, self.interval = history, interval
        self._offset = 0
        self._partial = b""
        self._lives: dict[int, list[ProcessLife]] = {}
        self._watched: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pid-monitor", daemon=True)
        self.polls = 0
        self.worst_gap = 0.0  # the longest time between two polls: how late a death may show

    def start(self) -> PidMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._poll()  # the last word, after the engines stopped

    def __enter__(self) -> PidMonitor:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def lives(self, pid: int) -> list[ProcessLife]:
        with self._lock:
            return list(self._lives.get(pid, []))

    def _run(self) -> None:
        last = time.time()
        while not self._stop.wait(self.interval):
            self._poll()
            now = time.time()
            self.worst_gap, last = max(self.worst_gap, now - last), now

    def _poll(self) -> None:
        with self._lock:
            self._follow()
            for pid in list(self._watched):
                self._look(pid)
            self.polls += 1

    def _follow(self) -> None:
        """New pids from the start records appended since the last poll."""
        try:
            with self.history.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry.get("ev") == "start":
                self._watch(int(entry["pid"]), float(entry["t"]))

    def _watch(self, pid: int, started: float) -> None:
        lives = self._lives.setdefault(pid, [])
        if pid in self._watched:
            return
        if lives and lives[-1].dead_at is not None and started < lives[-1].dead_at:
            return  # a late record of the process already seen dead
        self._watched.add(pid)
        seen = _stat(pid)
        if seen is None or seen[0] == "Z":
            # Gone before the first look: alive at its start record, no later.
            lives.append(ProcessLife(pid, "", started, started, started, time.time()))
            self._watched.discard(pid)
            return
        now = time.time()
        lives.append(ProcessLife(pid, seen[1], started, now, now))
        self._look(pid)

    def _look(self, pid: int) -> None:
        life = self._lives[pid][-1]
        seen = _stat(pid)
        now = time.time()
        if seen is None or seen[0] == "Z" or seen[1] != life.ticks:
            life.dead_at = now
            if life.stopped_since is not None:
                life.frozen.append((life.stopped_since, life.last_alive))
                life.stopped_since = None
            self._watched.discard(pid)
            if seen is not None and seen[0] != "Z":  # the pid was reused: follow the new one
                self._lives[pid].append(ProcessLife(pid, seen[1], now, now, now))
                self._watched.add(pid)
            return
        life.last_alive = now
        if seen[0] in "Tt":
            if life.stopped_since is None:
                life.stopped_since = life.last_running
        else:
            if life.stopped_since is not None:
                life.frozen.append((life.stopped_since, now))
                life.stopped_since = None
            life.last_running = now
