"""Keyed execution concurrency, and idempotent creates over the HTTP API.

A report runs per customer. Its launch plan allows one run per customer at a time (premium:
two) and three in all, and the customers take turns: acme sends eight requests first, yet
beta, gamma and premium start as soon as a slot frees, instead of after acme's backlog.

    ConcurrencyPolicy(max=1, key="{customer}", key_max={"premium": 2}, total_max=3)

Every request is sent twice with the same Idempotency-Key, as a client retrying after a
timeout would: the first answers 201, the retry 200 with the same execution.

    python examples/per_customer.py      # about 15 seconds, on a fresh database

It prints when each report started and for whom: the customers interleave.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import sluice


@sluice.task
def build_report(customer: str, seconds: float) -> str:
    time.sleep(seconds)
    return f"report for {customer}"


@sluice.workflow
def report(customer: str, seconds: float = 1.0) -> str:
    return build_report(customer=customer, seconds=seconds)


per_customer = sluice.LaunchPlan(
    "per_customer",
    report,
    concurrency=sluice.ConcurrencyPolicy(
        max=1, key="{customer}", key_max={"premium": 2}, total_max=3
    ),
)
REQUESTS = ["acme"] * 8 + ["beta", "beta", "gamma", "premium", "premium", "premium"]


Json = dict[str, Any]


def _call(
    base: str, method: str, path: str, body: object = None, key: str = ""
) -> tuple[int, Json]:
    request = urllib.request.Request(base + path, method=method)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Idempotency-Key", key)
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(request, data, timeout=30) as response:
        return response.status, json.loads(response.read())


def _serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "sluice", "serve", "--port", "0"]
    serve = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert serve.stdout is not None
    for line in serve.stdout:
        if line.startswith("HTTP API on "):
            return serve, line.split()[3]  # http://127.0.0.1:PORT/api/v1
    raise SystemExit("sluice serve stopped before serving")


def _twice(base: str, n: int) -> Json:
    """Create request `n`, then retry it with the same Idempotency-Key."""
    body = {"launch_plan": "per_customer", "inputs": {"customer": REQUESTS[n]}}
    first, made = _call(base, "POST", "/executions", body, key=f"req-{n}")
    retry, again = _call(base, "POST", "/executions", body, key=f"req-{n}")
    assert (first, retry, again["id"]) == (201, 200, made["id"])
    return made


def main() -> None:
    env = dict(os.environ)
    env.setdefault("SLUICE_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/per_customer.db")
    register = [sys.executable, "-m", "sluice", "launchplan", "register"]
    subprocess.run([*register, f"{__file__}:per_customer", "--activate"], env=env, check=True)
    serve, base = _serve(env)
    try:
        with ThreadPoolExecutor(len(REQUESTS)) as pool:  # every request arrives at once
            sent = list(pool.map(lambda n: _twice(base, n), range(len(REQUESTS))))
        ids = [made["id"] for made in sent]
        print(f"{len(ids)} requests, each sent twice: 201 then 200, one execution each")
        while True:
            _, page = _call(base, "GET", "/executions?limit=100")
            runs = [r for r in page["items"] if r["id"] in ids]
            if all(r["ended_at"] for r in runs):
                break
            time.sleep(0.5)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait()
    runs.sort(key=lambda r: r["started_at"])
    t0 = datetime.fromisoformat(runs[0]["started_at"])
    for r in runs:
        start = (datetime.fromisoformat(r["started_at"]) - t0).total_seconds()
        print(f"+{start:4.1f}s  {r['concurrency_key']:<8} {r['phase']}")


if __name__ == "__main__":
    main()
