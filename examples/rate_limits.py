"""Keyed rate limits: at most 2 calls a second to a paid API, per customer, across every
engine that shares the store.

Each call takes one unit of the "paid_api" limit's budget of its customer ("{customer}" is
filled from the task's inputs). Calls for one customer are spaced half a second apart on the
store's clock; customers do not wait for each other. A call waiting for its slot shows
"rate-limited on paid_api/acme: next slot in 0.4 s, position 2".

    python examples/rate_limits.py
    sluice ratelimit set paid_api 2/s         # or resources.rate_limits in the config
    sluice run examples/rate_limits.py:enrich
    sluice ratelimit ls                        # in another terminal: keys, next free, waiters
"""

from __future__ import annotations

import json
import os
import time

import sluice


@sluice.task(rate_limits=[sluice.RateLimit("paid_api", key="{customer}")])
def call_api(customer: str, record: int) -> str:
    return f"{customer}/{record} at {time.time():.3f}"


@sluice.task
def summary(calls: list[str]) -> str:
    customers = sorted({call.split("/")[0] for call in calls})
    return f"{len(calls)} calls for {', '.join(customers)}"


@sluice.workflow
def enrich() -> str:
    calls = [
        call_api(customer=customer, record=record)
        for customer in ("acme", "globex", "initech")
        for record in range(3)
    ]
    return summary(calls=calls)


if __name__ == "__main__":
    # The limit comes from the config; this run brings its own unless one is configured.
    os.environ.setdefault("SLUICE_RESOURCES__RATE_LIMITS", json.dumps({"paid_api": "2/s"}))
    raise SystemExit(sluice.main(["run", f"{__file__}:enrich"]))
