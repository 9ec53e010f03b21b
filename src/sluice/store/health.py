"""One process's view of a store it depends on (its database, or a resource store such as
Redis): up, lost, or gone.

Rules:
- A lost connection is reported ONCE: one warning line when the first operation fails
  (whichever loop hits it), one info line when an operation succeeds again. Every loop of the
  process shares this state, so loops never log their own tracebacks for
  StoreUnavailableError: they retry quietly while `down` is set.
- A database that is gone (StoreGoneError: does not exist, dropped, SQLite file removed or
  replaced) is given `gone_timeout` seconds to come back; after that `fatal` holds the error
  and the process is expected to stop (the CLI exits 4 with one message). A replaced SQLite
  file never comes back, so `fail_now` makes it fatal at once.
- The hot path pays one attribute check per transaction (`ok` while not down).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sluice.errors import BackendUnavailableError, StoreGoneError, StoreUnavailableError

log = logging.getLogger(__name__)
_CONNECTION_ERRORS = (StoreUnavailableError, BackendUnavailableError, ConnectionError, TimeoutError)


class StoreHealth:
    def __init__(
        self,
        display: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        noun: str = "database",
    ) -> None:
        self.display = display
        self.noun = noun
        self.gone_timeout = 30.0
        self._clock = clock
        self.down_since: float | None = None
        self.gone_since: float | None = None
        self.last_error: Exception | None = None
        self.fatal: StoreGoneError | None = None
        self.outages = 0
        self.announce = False
        """Log outage lines: an engine turns it on; a one-shot command's error line says it."""

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def lost(self, error: Exception) -> None:
        """An operation could not reach the store; the first of an outage logs a line."""
        now = self._clock()
        self.last_error = error
        if self.down_since is None:
            self.down_since = now
            self.outages += 1
            if self.announce:
                log.warning("lost the %s %s: %s; retrying", self.noun, self.display, error)
        if isinstance(error, StoreGoneError):
            if self.gone_since is None:
                self.gone_since = now
            if now - self.gone_since >= self.gone_timeout and self.fatal is None:
                self.fatal = error

    def fail_now(self, error: StoreGoneError) -> None:
        """The database can never come back to this process (its file was replaced). Not
        logged here: whoever stops the process reports `fatal`, once."""
        if self.down_since is None:
            self.down_since = self._clock()
            self.outages += 1
        self.last_error = error
        self.fatal = self.fatal or error

    def ok(self) -> None:
        """An operation succeeded: end the outage (one line) if there was one."""
        if self.down_since is None:
            return
        if self.announce:
            outage = self._clock() - self.down_since
            log.warning("the %s %s is back after %.1fs", self.noun, self.display, outage)
        self.down_since = self.gone_since = self.last_error = None

    def expected(self, error: BaseException) -> bool:
        """An error this state already reported (or will): loops skip their traceback."""
        seen: BaseException | None = error
        while seen is not None:
            if isinstance(seen, _CONNECTION_ERRORS):
                return True
            seen = seen.__cause__ or seen.__context__
        return False

    def log_filter(self, record: logging.LogRecord) -> bool:
        """A logging filter: drop other components' tracebacks of a connection error while
        this outage is already reported; keep everything else."""
        if record.exc_info and record.exc_info[1] is not None and self.down:
            return not self.expected(record.exc_info[1])
        return True
