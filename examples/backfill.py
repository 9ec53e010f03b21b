"""Backfill a scheduled launch plan over past days.

`nightly` exports a day of data at 03:00, Paris time. It was deployed today, so the nights
before never ran: a backfill runs them, one execution per schedule slot, at most three at a
time, through the launch plan's own concurrency policy (one export at a time). The export is
flaky (a run fails one time in three), so a second backfill with `--reprocess failed` runs
again only the nights that did not succeed; running the first backfill again creates nothing.

    sluice launchplan register examples/backfill.py:nightly --activate
    sluice launchplan backfill nightly --from 2026-01-01 --to 2026-01-10 --max-active 3 --wait
    sluice launchplan backfill nightly --from 2026-01-01 --to 2026-01-10       # nothing new
    sluice launchplan backfill nightly --from 2026-01-01 --to 2026-01-10 --reprocess failed
    sluice backfill ls

(`--wait` runs the backfill in the command; with `sluice serve` running, leave it out.) Or
run this file: it does the same on a fresh database and prints each backfill's progress.

    python examples/backfill.py
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from typing import Any

import sluice


@sluice.task
def export_day(seconds: float) -> str:
    import time

    time.sleep(seconds)
    if random.random() < 1 / 3:
        raise RuntimeError("the warehouse timed out")
    return "exported"


@sluice.workflow
def export(seconds: float = 0.2) -> str:
    return export_day(seconds=seconds)


nightly = sluice.LaunchPlan(
    "nightly",
    export,
    schedule=sluice.Schedule(cron="0 3 * * *", timezone="Europe/Paris"),
    concurrency=sluice.ConcurrencyPolicy(max=1),
)
RANGE = ["--from", "2026-01-01", "--to", "2026-01-10"]


def _sluice(env: dict[str, str], *args: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "sluice", *args, "--json"]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def main() -> None:
    env = dict(os.environ)
    env.setdefault("SLUICE_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/backfill.db")
    _sluice(env, "launchplan", "register", f"{__file__}:nightly", "--activate")
    steps = [
        ("first backfill", ["--max-active", "3", "--wait"]),
        ("the same again", []),
        ("reprocess failed", ["--reprocess", "failed", "--wait"]),
    ]
    for title, options in steps:
        found = _sluice(env, "launchplan", "backfill", "nightly", *RANGE, *options)
        print(f"{title:<17} {found['state']:<5} {found['slots']:>2} slot(s)  {found['progress']}")


if __name__ == "__main__":
    main()
