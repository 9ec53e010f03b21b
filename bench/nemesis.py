"""Figures of the nemeses, one JSON line per (nemesis, backend).

    .venv/bin/python bench/nemesis.py                    # every nemesis on every backend
    .venv/bin/python bench/nemesis.py --only pause slow  # some of them
    .venv/bin/python bench/nemesis.py --controls         # and the controls

Each line runs one deterministic scenario of tests/faults/scenarios.py (two engines, 8
executions of the mixed workload, a fault of 6 s on the engine running the first execution's
quota-1 body, past every lease) and reports what the history checker found:

- `violations` (must be 0) and `violation_kinds` (quota over, lock shared, cache key computed
  twice at once, execution driven by two engines, node run twice at once, outcome saved
  twice, ran after its outcome was saved, re-run without a kill or a fence, ...);
- `reruns` by cause: `kill` (in flight at a SIGKILL), `fenced` (its worker died without its
  engine being killed, or it ended while its engine was paused or cut off), `other` (each one
  also a violation);
- `thaw_overlaps` and `thaw_overlap_max_s`: overlaps inside the 0.5 s after a thaw, the
  window no lease closes (not violations);
- `takeover` (pause, partition, slow): of the executions the victim owned at the fault
  (`owned`), how many another engine claimed while the fault lasted (`taken`: the owner in
  the store, polled every 0.1 s), and the seconds from the fault's start to each claim
  (first, median, last), beside the execution lease (`lease_s`).

PostgreSQL (a database created per line and dropped) and Redis (a key prefix, deleted) are
skipped when unreachable; the skew, partition and slow nemeses need root (network and UTS
namespaces) and libfaketime (`apt-get install faketime`), and are skipped without them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from faults import scenarios
from faults.hosts import FAKETIME_LIB
from faults.network import namespaces_missing
from resources import REDIS_URL, delete_redis_keys, postgres_database, reachable

# (nemesis, backend): backend "sqlite", "postgresql", or "postgresql+redis" (Redis tokens).
PLAN = [
    ("pause", "sqlite"),
    ("pause-workers", "sqlite"),
    ("pause", "postgresql"),
    ("pause-workers", "postgresql"),
    ("skew+90", "postgresql"),
    ("skew-90", "postgresql+redis"),
    ("partition", "postgresql"),
    ("slow", "postgresql"),
]
CONTROLS = [("pause-short", "sqlite"), ("partition-short", "postgresql"), ("skew0", "postgresql")]


def _missing(name: str, backend: str) -> str | None:
    scenario = scenarios.SCENARIOS[name]
    if backend != "sqlite" and not reachable("127.0.0.1", 5432):
        return "PostgreSQL is not reachable at 127.0.0.1:5432"
    if backend.endswith("+redis") and not reachable("127.0.0.1", 6379):
        return "Redis is not reachable at 127.0.0.1:6379"
    if scenario.hostnames or scenario.netns:
        reason = namespaces_missing()
        if reason:
            return reason
    if any(scenario.skews) and not FAKETIME_LIB.exists():
        return "needs libfaketime (apt-get install faketime)"
    return None


def one(name: str, backend: str) -> dict[str, Any]:
    reason = _missing(name, backend)
    if reason:
        return {"nemesis": name, "backend": backend, "skipped": reason}
    with tempfile.TemporaryDirectory(prefix="sluice-nemesis-") as tmp:
        if backend == "sqlite":
            url = f"sqlite:///{tmp}/sluice.db"
            outcome = asyncio.run(scenarios.run(name, url, Path(tmp), backend))
            return outcome.figures()
        with postgres_database() as url:
            tokens = None
            if backend.endswith("+redis"):
                tokens = {"url": REDIS_URL, "key_prefix": f"sluice-bench-{secrets.token_hex(4)}"}
            try:
                outcome = asyncio.run(scenarios.run(name, url, Path(tmp), backend, tokens))
            finally:
                if tokens:
                    delete_redis_keys(tokens["key_prefix"])
            return outcome.figures()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="nemesis names (default: all)")
    parser.add_argument("--controls", action="store_true", help="also the control scenarios")
    args = parser.parse_args(argv)
    plan = PLAN + (CONTROLS if args.controls else [])
    for name, backend in plan:
        if args.only and name not in args.only:
            continue
        print(json.dumps(one(name, backend)), flush=True)


if __name__ == "__main__":
    main()
