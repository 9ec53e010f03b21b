"""Helpers of the Flyte tests (tests/flyte): run the sluice CLI on a store of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FLOWS_ROOT = Path(__file__).resolve().parents[1] / "flyte"  # `flyteflows` is a package under it
CHAIN = FLOWS_ROOT / "flyteflows" / "chain.py"


def env(db: Path, work: Path | None = None, **extra: str) -> dict[str, str]:
    """A sluice CLI environment on its own SQLite store; bodies record runs in `work`."""
    found = {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": "1",
        **extra,
    }
    if work is not None:
        found["SLUICE_FLYTE_TEST_DIR"] = str(work)
    return found


def sluice(
    db: Path, *args: str, work: Path | None = None, timeout: float = 240, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        env=env(db, work),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or db.parent,
    )


def history(work: Path) -> list[str]:
    """The names of the task bodies that ran, in order."""
    path = work / "history"
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []
