"""A scheduled workflow that must never overlap with itself.

`sync` fires every 2 seconds but takes 5, like a cron job that polls for new files and then
holds a resource that allows a single user. Its launch plan says ConcurrencyPolicy(max=1,
SKIP): a firing that comes while a run is active ends SKIPPED at once (with a reason naming
the run), instead of piling up or running alongside it.

    sluice launchplan register examples/no_overlap.py:no_overlap --activate
    sluice serve                      # the controller, the schedules and an engine; Ctrl-C
    sluice executions ls              # SUCCEEDED runs, SKIPPED firings in between

Or run this file: it does the same on a fresh database for about 12 seconds and prints what
each firing became.

    python examples/no_overlap.py [SECONDS]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

import sluice


@sluice.task
def sync_files(seconds: float) -> str:
    time.sleep(seconds)
    return f"synced for {seconds:g} s"


@sluice.workflow
def sync(seconds: float = 5.0) -> str:
    return sync_files(seconds=seconds)


no_overlap = sluice.LaunchPlan(
    "no_overlap",
    sync,
    schedule=sluice.Schedule(fixed_rate=2.0),
    concurrency=sluice.ConcurrencyPolicy(max=1, behavior=sluice.ConcurrencyBehavior.SKIP),
)


def _sluice(*args: str, env: dict[str, str]) -> str:
    command = [sys.executable, "-m", "sluice", *args]
    return subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout


def _clock(when: str | None) -> str:
    """An ISO-8601 time from `--json` output as local HH:MM:SS."""
    return datetime.fromisoformat(when).astimezone().strftime("%H:%M:%S") if when else "--:--:--"


def main(seconds: float) -> None:
    env = dict(os.environ)
    env.setdefault("SLUICE_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/no_overlap.db")
    print(_sluice("launchplan", "register", f"{__file__}:no_overlap", "--activate", env=env))
    serve = subprocess.Popen([sys.executable, "-m", "sluice", "serve", "--no-http"], env=env)
    time.sleep(seconds)
    serve.send_signal(signal.SIGTERM)
    serve.wait()
    rows = json.loads(_sluice("executions", "ls", "--json", "--limit", "1000", env=env))
    for row in sorted(rows, key=lambda r: r["created_at"]):
        if row["ended_at"] and row["started_at"]:
            detail = f"ran {_clock(row['started_at'])}-{_clock(row['ended_at'])}"
        elif row["started_at"]:
            detail = f"started {_clock(row['started_at'])}, still running when serve stopped"
        else:
            detail = row["reason"]
        print(f"fired {_clock(row['created_at'])}  {row['phase']:<9}  {detail}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 12.0)
