"""Two engine processes (two `sluice run` on one store) share one rate limit budget: the
admissions of both, in the store's own times that every RATE_ADMITTED event carries, are
spaced as one limit allows, never as two; `sluice ratelimit ls` shows the waiters meanwhile."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FLOWS = Path(__file__).parent / "rate_flows.py"
RATE, INTERVAL, CALLS = "3/s", 1 / 3, 6  # calls per run (six_calls); two runs


def _env(db: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": "2",
        "SLUICE_RESOURCES__RATE_LIMITS": json.dumps({"api": RATE}),
    }


def _sluice(db: Path, *args: str, wait: bool = True) -> Any:
    command = [sys.executable, "-m", "sluice", *args]
    if not wait:
        return subprocess.Popen(
            command, env=_env(db), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    return subprocess.run(command, env=_env(db), cwd=ROOT, capture_output=True, text=True)


def _waiting(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(
            conn.execute("SELECT count(*) FROM rate_limit_tickets WHERE NOT granted").fetchone()[0]
        )


def _store_times(db: Path) -> list[float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT info FROM events WHERE phase = 'RATE_ADMITTED'").fetchall()
    return sorted(json.loads(info)["store_time"] for (info,) in rows)


def test_two_engines_share_one_budget(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert _sluice(db, "db", "upgrade").returncode == 0
    runs = [
        _sluice(
            db,
            "run",
            f"{FLOWS}:six_calls",
            "--input",
            "customer=acme",
            wait=False,
        )
        for _ in range(2)
    ]
    listed: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(r.poll() is None for r in runs):
        if _waiting(db) >= 2:
            shown = _sluice(db, "ratelimit", "ls", "api", "--json")
            assert shown.returncode == 0, shown.stderr
            listed = json.loads(shown.stdout)
            if listed and any(k["waiters"] for k in listed[0]["keys"]):
                break
        time.sleep(0.1)
    codes = [(r.wait(timeout=180), r.stderr.read().decode() if r.stderr else "") for r in runs]
    assert [code for code, _ in codes] == [0, 0], codes

    times = _store_times(db)
    assert len(times) == 2 * CALLS
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # one budget: every admission of either engine one interval after the previous one
    assert min(gaps) >= INTERVAL - 1e-6, gaps
    [api] = listed
    assert (api["rate"], api["source"]) == (RATE, "config")
    [acme] = api["keys"]
    assert acme["key"] == "acme"
    assert [w["position"] for w in acme["waiters"]] == list(range(1, len(acme["waiters"]) + 1))
