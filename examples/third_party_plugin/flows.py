"""A workflow using the third-party "wait" task type (install the package first)."""

from __future__ import annotations

import sluice


@sluice.task(type="wait", custom={"seconds": 0.3})
def pause() -> float: ...


@sluice.task
def after(waited: float) -> str:
    return f"waited {waited}s"


@sluice.workflow
def paced() -> str:
    return after(waited=pause())
