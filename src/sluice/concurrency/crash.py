"""A test-only hook: make the controller kill its own process at a chosen step.

Set `SLUICE_TEST_CONTROLLER_CRASH_AT=STEP` (or `STEP:N` for the N-th time the step is
reached) and the controller SIGKILLs itself there, so crash tests can check that a restarted
controller loses no execution, launches none twice and holds every limit. Never set it in
production. The steps of a promotion, in order:

- `after_rebuild`: memory rebuilt from the store, nothing decided yet;
- `after_decision`: decisions made in memory, nothing written;
- `mid_write`: inside the decision transaction, after the compare-and-swaps, before commit;
- `after_commit`: the decisions committed, before this process acts on them;
- `after_abort`: a REPLACE abort committed, before the replacement is promoted.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.errors import InvalidArgumentError

CRASH_ENV = "SLUICE_TEST_CONTROLLER_CRASH_AT"
STEPS = ("after_rebuild", "after_decision", "mid_write", "after_commit", "after_abort")


@dataclass
class CrashHook:
    step: str | None = None
    nth: int = 1
    seen: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CrashHook:
        text = (env if env is not None else os.environ).get(CRASH_ENV, "")
        if not text:
            return cls()
        step, _, count = text.partition(":")
        if step not in STEPS or (count and not count.isdigit()):
            raise InvalidArgumentError(
                f"{CRASH_ENV}={text!r}: expected STEP or STEP:N with STEP one of {STEPS}"
            )
        return cls(step, int(count or 1))

    def reached(self, step: str) -> None:
        if step != self.step:
            return
        self.seen += 1
        if self.seen >= self.nth:
            os.kill(os.getpid(), signal.SIGKILL)
