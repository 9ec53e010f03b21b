"""Fencing by lease: an engine acts only while it can show its leases alive, and so do the
worker processes that run its task bodies (docs/invariants.md, "Fencing").

The store judges every lease on its own clock and keeps it for the full lease after the
store's time of the renewal. The engine measures, on its MONOTONIC clock, from the moment it
SENT its last successful renewal of each kind of lease (a round over every execution it owns,
every token its tasks hold, each cache reservation): a lease renewed at monotonic time `t`
cannot lapse in the store before `t + lease`. The engine's deadline is the earliest
`t + lease x (1 - margin)` over what it holds. Past it, the engine is fenced: it launches
nothing and calls no plugin, its worker processes end their bodies (their watchdog reads the
same deadline from a small shared file), and it re-verifies every lease before it goes on.
So a paused, cut-off or overloaded engine stops its bodies `margin x lease` before anyone
else can take what they hold.

What no lease can close: a whole machine (engine and workers) frozen mid-body runs nothing
while frozen, but the instructions between its thaw and the watchdog's next look (a few
milliseconds) still run. Only an external system that checks the fencing token (the
ownership epoch handed to task code) closes that window.

This module is imported by worker processes: it imports nothing of sluice.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Hashable

FENCED_EXIT = 75
"""Exit code of a worker process whose watchdog ended its body (EX_TEMPFAIL)."""
FENCED_ERROR = "Fenced"
"""The error code of an attempt whose body fencing ended or never started: the engine starts
the attempt again without spending a retry (it is not the task's failure)."""
DEFAULT_MARGIN = 0.25
"""Fraction of a lease kept between the engine's deadline and the lease's end in the store:
room for the watchdog to act and for clock rate drift."""
_FORMAT = struct.Struct("<dd")
"""The shared deadline, written twice: a reader that sees the two halves differ read a write
in progress and reads again."""
_WATCH_CAP = 0.25
"""Longest a watchdog sleeps between two looks at the deadline."""


def _shared_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class LeaseFence:
    """The engine side: proofs of renewal by lease kind, the deadline they give, and the file
    the engine's workers watch. With nothing proved the fence is open (deadline infinite)."""

    def __init__(
        self,
        margin: float = DEFAULT_MARGIN,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < margin < 1:
            raise ValueError(f"fence margin must be between 0 and 1, got {margin!r}")
        self._margin = margin
        self._monotonic = monotonic
        self._proofs: dict[Hashable, float] = {}
        self._deadline = math.inf
        self._file: _DeadlineFile | None = None
        self._deferred: set[tuple[str, str]] = set()

    @property
    def deadline(self) -> float:
        """Monotonic time past which this engine may not act (inf: nothing to prove)."""
        return self._deadline

    def live(self) -> bool:
        return self._monotonic() < self._deadline

    def remaining(self) -> float:
        """Seconds until the deadline (negative once fenced)."""
        return self._deadline - self._monotonic()

    def now(self) -> float:
        """The monotonic time to stamp a renewal with, taken BEFORE sending it."""
        return self._monotonic()

    def proved(self, kind: Hashable, sent_at: float, lease: float) -> None:
        """Every lease of `kind` this engine holds was renewed (or needed none) by a request
        sent at monotonic `sent_at`, for `lease` seconds: it holds until `sent_at + lease`."""
        self._proofs[kind] = sent_at + lease * (1 - self._margin)
        self._update()

    def forget(self, kind: Hashable) -> None:
        """This engine holds no lease of `kind` any more."""
        if self._proofs.pop(kind, None) is not None:
            self._update()

    def forget_where(self, matches: Callable[[Hashable], bool]) -> None:
        for kind in [k for k in self._proofs if matches(k)]:
            del self._proofs[kind]
        self._update()

    def defer(self, execution_id: str, node_id: str) -> None:
        """A node that wanted to act while fenced: handed back by `restored`."""
        self._deferred.add((execution_id, node_id))

    def restored(self) -> set[tuple[str, str]]:
        """The nodes deferred while fenced (the caller steps them again), forgotten here."""
        deferred, self._deferred = self._deferred, set()
        return deferred

    def _update(self) -> None:
        deadline = min(self._proofs.values(), default=math.inf)
        if deadline != self._deadline:
            self._deadline = deadline
            if self._file is not None:
                self._file.write(deadline)

    def shared_file(self) -> str:
        """The path of the file this engine's worker processes watch (made on first use)."""
        if self._file is None:
            self._file = _DeadlineFile.create()
            self._file.write(self._deadline)
        return self._file.path

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class _DeadlineFile:
    """A 16-byte file mapped in memory holding the engine's deadline."""

    def __init__(self, path: str, fd: int, view: mmap.mmap) -> None:
        self.path, self._fd, self._view = path, fd, view

    @classmethod
    def create(cls) -> _DeadlineFile:
        fd, path = tempfile.mkstemp(prefix=f"sluice-fence-{os.getpid()}-", dir=_shared_dir())
        os.ftruncate(fd, _FORMAT.size)
        return cls(path, fd, mmap.mmap(fd, _FORMAT.size))

    def write(self, deadline: float) -> None:
        self._view[:] = _FORMAT.pack(deadline, deadline)

    def close(self) -> None:
        self._view.close()
        os.close(self._fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def read_deadline(view: mmap.mmap) -> float:
    for _ in range(100):
        first, second = _FORMAT.unpack(view[:])
        if first == second:
            return float(first)
    return -math.inf  # never settled: treat as fenced


class Watchdog:
    """The worker side: a thread that ends this process (and so the body it runs) once the
    engine's deadline passes while a body runs; `expired` tells the worker not to start one.
    A deadline the engine moves later in time keeps the body alive."""

    def __init__(
        self,
        path: str,
        on_fenced: Callable[[], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self._view = mmap.mmap(fd, _FORMAT.size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.path = path
        self._on_fenced = on_fenced
        self._monotonic = monotonic
        self._running = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sluice-fence", daemon=True)
        self._thread.start()

    def deadline(self) -> float:
        return read_deadline(self._view)

    def expired(self) -> bool:
        return self._monotonic() >= self.deadline()

    def body_started(self) -> None:
        self._running.set()

    def body_ended(self) -> None:
        self._running.clear()

    def _watch(self) -> None:
        while True:
            self._running.wait()
            left = self.deadline() - self._monotonic()
            if left <= 0 and self._running.is_set():
                self._on_fenced()
                return
            time.sleep(min(max(left, 0.001), _WATCH_CAP))
