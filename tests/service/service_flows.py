"""Workflows the service tests run; importable on its own (the engine's workers load it)."""

from __future__ import annotations

from pathlib import Path

import sluice


@sluice.task(quotas=[sluice.Quota("scoring-api")], retries=1)
def score(x: int) -> int:
    print(f"scoring {x}", flush=True)
    raise ValueError(f"cannot score {x}")


@sluice.workflow
def scoring(x: int = 3) -> int:
    return score(x=x)


@sluice.task
def prepare(directory: str, n: int) -> list[int]:
    """Counts its runs in `directory`/prepare.runs: a retry that reuses it never runs it."""
    runs = Path(directory) / "prepare.runs"
    runs.write_text(str(int(runs.read_text() or "0") + 1) if runs.exists() else "1")
    return list(range(n))


@sluice.task
def fragile(directory: str, values: list[int]) -> int:
    """Fails while `directory`/broken exists."""
    if (Path(directory) / "broken").exists():
        raise RuntimeError("the warehouse is read-only")
    return sum(values)


@sluice.workflow
def two_steps(directory: str, n: int = 4) -> int:
    return fragile(directory=directory, values=prepare(directory=directory, n=n))


two_steps_plan = sluice.LaunchPlan("two_steps_plan", two_steps)
