"""Named crash points: the places where a test may make this process die.

Production code calls `crash_point("engine.after_claim")` at each step of a task's life (and
the controller's) where a crash matters. By default that is a no-op: one global read. A test
that wants a process to die there installs a hook in that process (its own worker script
calls `install(KillAt("engine.after_claim", nth=2))` before it starts the engine), so no
production code ever reads a crash setting from the environment or a file.

The points, in the order a task meets them (engine) and a promotion meets them (controller):
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from sluice.errors import InvalidArgumentError

POINTS: dict[str, str] = {
    "engine.after_claim": "quotas and locks granted in the resource store, node not yet saved",
    "engine.after_reserve": "cache reservation taken, node not yet saved",
    "engine.after_launch": "the plugin started the attempt's work, node not yet saved",
    "engine.after_persist": "a reconcile pass committed its node updates and events",
    "engine.after_success": "the plugin reported success, before finalize and the cache put",
    "engine.after_put": "outputs put in the cache, reservation not yet released",
    "engine.before_reservation_release": "about to release the cache reservation",
    "engine.before_release": "about to give back the task's tokens and locks",
    "preempt.before_release": "a preempted attempt found its mark, before it stops and releases",
    "ratelimit.after_admit": "a rate limit admission judged in the store, its answer not yet used",
    "controller.after_rebuild": "memory rebuilt from the store, nothing decided yet",
    "controller.after_decision": "decisions made in memory, nothing written",
    "controller.mid_write": "inside the decision transaction, before commit",
    "controller.after_commit": "the decisions committed, before this process acts on them",
    "controller.after_abort": "a REPLACE abort committed, before the replacement is promoted",
    "compound.after_child_execution": "a launch plan node created its execution, node not saved",
    "launch.after_idempotency_key": "an idempotency key claimed, its execution not yet written",
    "backfill.mid_create": "inside a backfill's creation transaction, an execution written",
    "backfill.after_create": "a backfill's creations committed, before the next step",
    "flyte.mid_register": "a Flyte entity inserted by the gRPC API, its transaction not committed",
    "flyte.after_register": "a Flyte entity registered, before the gRPC reply",
    "flyte.after_create": "an execution created by the gRPC API, before the reply",
}
__doc__ = (__doc__ or "") + "".join(f"\n- `{p}`: {what}" for p, what in POINTS.items()) + "\n"

Hook = Callable[[str], None]
_hook: Hook | None = None


def crash_point(name: str) -> None:
    """Give an installed test hook the chance to act (kill this process) at `name`."""
    if _hook is not None:
        _hook(name)


def install(hook: Hook | None) -> None:
    """Install (or, with None, remove) this process's hook. Tests only."""
    global _hook
    _hook = hook


@dataclass
class KillAt:
    """SIGKILL this process the `nth` time any of `points` is reached."""

    points: tuple[str, ...]
    nth: int = 1
    seen: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        unknown = [p for p in self.points if p not in POINTS]
        if unknown:
            raise InvalidArgumentError(
                f"unknown crash point(s) {unknown}: expected some of {sorted(POINTS)}"
            )
        if self.nth < 1:
            raise InvalidArgumentError(f"nth={self.nth}: must be at least 1")

    @classmethod
    def parse(cls, text: str) -> KillAt:
        """`POINT` or `POINT:N` (or several points joined by `,` before `:N`)."""
        points, _, count = text.partition(":")
        if count and not count.isdigit():
            raise InvalidArgumentError(f"crash point {text!r}: expected POINT or POINT:N")
        return cls(tuple(p for p in points.split(",") if p), int(count or 1))

    def __call__(self, name: str) -> None:
        if name not in self.points:
            return
        self.seen += 1
        if self.seen >= self.nth:
            os.kill(os.getpid(), signal.SIGKILL)
