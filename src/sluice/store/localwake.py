"""A local wake-up channel for the processes sharing one SQLite file.

SQLite has no notifications: a process learns of another's commit by looking. Instead of
looking every 20 ms, each process's notifier binds a Unix datagram socket in Linux's abstract
namespace (no file to clean up after a crash) and registers its name as an empty file in a
directory beside the database, `<database>-wake/`. A process that commits a notification row
sends one byte to every registered name; the receiver then reads the new rows at once. A
name whose socket is gone (its process died) refuses the datagram, and the sender removes
the stale file.

A hint only: a lost datagram (a full receive buffer already holds a wake-up) or a process
outside this host's network namespace is caught by the notifier's slower fallback poll.
Linux only: elsewhere `LocalWake.open` returns None and the notifier polls as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sluice.store.database import PRIVATE_DIR_MODE

log = logging.getLogger(__name__)
_PREFIX = "\0sluice-wake/"
_RELIST = 1.0


def wake_dir(database: Path) -> Path:
    """The directory beside `database` holding the registered names."""
    return database.with_name(database.name + "-wake")


class WakeSender:
    """Sends wake-ups to every process registered beside one database.

    A receiver reads every new row when woken, so the commits a task makes before it yields
    need two wake-ups per process, not one each: the first commit of a turn of the event
    loop sends at once (no delay on a hand-off), and if more commits follow in the same
    turn, one more goes when the task yields (a `call_soon` callback), so no row is left
    unannounced.
    """

    def __init__(self, database: Path) -> None:
        self._dir = wake_dir(database)
        self._base: str | None = None
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._peers: list[str] = []
        self._peers_read_at = -1
        self._listed_at = 0.0
        self._turn: asyncio.AbstractEventLoop | None = None  # a wake-up went in its turn
        self._owed = False  # commits since then, to announce when the turn ends

    def wake_all(self) -> None:
        """Wake every registered process (this one included), forgetting the dead: now for
        the first commit of this turn of the running event loop (or without a loop), at
        the end of the turn for the ones after it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.send_now()
            return
        if self._turn is loop:
            self._owed = True
            return
        self._turn = loop
        loop.call_soon(self._end_turn)
        self.send_now()

    def _end_turn(self) -> None:
        self._turn = None
        if not self._owed:
            return
        self._owed = False
        try:
            self.send_now()
        except OSError:  # a hint only: the fallback poll delivers anyway
            log.debug("local wake-up failed", exc_info=True)

    def send_now(self) -> None:
        """Send a wake-up to every registered process now; forget the dead."""
        names = list(self._registered())  # a copy: forget() removes from the listing
        if not names or self._base is None:
            return
        for name in names:
            try:
                self._sender.sendto(b"!", self._base + name)
            except (ConnectionRefusedError, FileNotFoundError):
                self.forget(name)
            except OSError:  # a full buffer: a wake-up is already pending there
                pass

    def _registered(self) -> list[str]:
        try:
            stat = os.stat(self._dir)
        except OSError:
            return []
        # The directory's mtime moves when a process registers or leaves, but only with the
        # file system's timestamp granularity: a listing is also redone once it is a second old.
        now = time.monotonic()
        if stat.st_mtime_ns != self._peers_read_at or now - self._listed_at > _RELIST:
            with contextlib.suppress(OSError):
                self._peers = os.listdir(self._dir)
                self._peers_read_at = stat.st_mtime_ns
                self._listed_at = now
                self._base = _PREFIX + _key(stat)
        return self._peers

    def forget(self, name: str) -> None:
        with contextlib.suppress(OSError):
            (self._dir / name).unlink()
        with contextlib.suppress(ValueError):
            self._peers.remove(name)

    def close(self) -> None:
        """Send a wake-up still owed, then close."""
        if self._owed:
            self._end_turn()
        self._sender.close()


class WakeReceiver:
    """This process's registered socket: calls back on each wake-up."""

    def __init__(self, database: Path, sock: socket.socket, name: str) -> None:
        self._dir = wake_dir(database)
        self._sock = sock
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def open(cls, database: Path) -> WakeReceiver | None:
        """Bind and register; None where the channel is not available (not Linux, or the
        directory cannot be made)."""
        if not sys.platform.startswith("linux"):
            return None
        directory = wake_dir(database)
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
            sock.bind(_PREFIX + _key(os.stat(directory)) + name)
            sock.setblocking(False)
            (directory / name).touch(mode=0o600)
        except OSError as exc:
            sock.close()
            log.debug("no local wake-up channel beside %s (%s): polling only", database, exc)
            return None
        return cls(database, sock, name)

    def start(self, on_wake: Callable[[], None]) -> None:
        """Call `on_wake` on this loop whenever a wake-up arrives."""
        self._loop = asyncio.get_running_loop()

        def readable() -> None:
            with contextlib.suppress(OSError):
                while self._sock.recv(64):
                    pass
            on_wake()

        self._loop.add_reader(self._sock.fileno(), readable)

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._sock.fileno())
        with contextlib.suppress(OSError):
            (self._dir / self._name).unlink()
        self._sock.close()


def _key(stat: os.stat_result) -> str:
    """The directory's identity in socket names, so two databases never share names."""
    return f"{stat.st_dev:x}-{stat.st_ino:x}/"
