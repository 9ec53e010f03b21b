"""Lock-keyed task concurrency: rewrite database partitions, one writer per partition.

Each task locks the partitions it writes ("db/partition/<n>", one lock per item of its
`partitions` input). Tasks that share a partition never run at once, in this workflow or in any
other run on the same store; tasks on disjoint partitions run in parallel.

    python examples/partitions.py
    sluice run examples/partitions.py:nightly_rewrite
    sluice locks ls            # in another terminal while it runs: holders and waiters
"""

from __future__ import annotations

import time

import sluice


@sluice.task(locks=sluice.Locks("db/partition/{item}", for_each="partitions"))
def rewrite(batch: str, partitions: list[int]) -> str:
    time.sleep(0.5)  # the rewrite holds every partition it touches
    return f"{batch}: rewrote {partitions}"


@sluice.task
def summary(lines: list[str]) -> str:
    return "\n".join(lines)


@sluice.workflow
def nightly_rewrite() -> str:
    batches = {
        "a": [1, 2],
        "b": [2, 3],  # shares partition 2 with a: waits for it
        "c": [4, 5],  # disjoint: runs alongside a
        "d": [5, 1],  # shares 5 with c and 1 with a
    }
    return summary(lines=[rewrite(batch=name, partitions=p) for name, p in batches.items()])


if __name__ == "__main__":
    raise SystemExit(sluice.main(["run", f"{__file__}:nightly_rewrite"]))
