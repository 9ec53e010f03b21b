"""Idempotent creation from Python: a retried call does not run the work twice.

`charge` must run once per order, however often a client retries (after a timeout, a crash,
a redeploy). Each call passes the order as its idempotency key: the first creates and runs
the execution, a retry within `concurrency.idempotency_retention` (24 h by default) returns
that execution's outputs without running anything, and the same key with other inputs is
refused, naming the key.

    python examples/idempotent_run.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import sluice


@sluice.task
def charge_card(order: str, cents: int) -> str:
    return f"receipt-{order}-{cents}"


@sluice.workflow
def charge(order: str, cents: int) -> str:
    return charge_card(order=order, cents=cents)


def main() -> None:
    os.environ.setdefault("SLUICE_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/pay.db")
    first = sluice.run(charge, idempotency_key="order-1001", order="1001", cents=500)
    retry = sluice.run(charge, idempotency_key="order-1001", order="1001", cents=500)
    print(f"first call: {first}, retry: {retry}")
    try:
        sluice.run(charge, idempotency_key="order-1001", order="1001", cents=700)
    except sluice.SluiceError as exc:
        print(f"same key, other inputs: refused: {exc}")
    listed = subprocess.run(
        [sys.executable, "-m", "sluice", "executions", "ls", "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    print(f"executions in the store: {len(json.loads(listed.stdout))}")  # 1: it ran once


if __name__ == "__main__":
    main()
