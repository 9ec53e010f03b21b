"""Preemption latency: from a high-priority claim's ask to its grant, one JSON line.

    .venv/bin/python bench/preemption.py                   # SQLite and PostgreSQL
    .venv/bin/python bench/preemption.py --rounds 3 --backends sqlite

Each round runs `examples/preemption.py`'s scenario on a fresh database: a priority-0 task
holds the quota "warehouse" (1, preemption on) with a long body on one engine; a
priority-10 task is launched on a second engine of the same process. The figure is the
urgent task's wait, from its first ask (the refusal that marked the victim, its event
PREEMPTING) to its grant (GRANTED): the victim's engine learns of the mark (here at once,
through the manager's in-process notice), aborts the body, releases the token, and the
urgent claim is woken and granted. Per backend: p50 and p90 over the rounds, in seconds.

`sqlite`: the store and the tokens in one SQLite file. `postgresql`: the store and tokens in
a PostgreSQL database created for the run (127.0.0.1:5432) and dropped; skipped when
unreachable. Engines in other processes learn of a mark at their next token renewal instead
(every `resources.lease / 3`, 10 s by default), which this bench does not measure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "examples"))

from preemption import preempt_once

from resources import postgres_database, reachable


def _quantiles(waits: list[float]) -> dict[str, float]:
    ordered = sorted(waits)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"p50_s": round(statistics.median(ordered), 4), "p90_s": round(p90, 4)}


def _round(url: str | None, tmp: Path) -> float:
    database = url or f"sqlite:///{tmp}/sluice.db"
    found = asyncio.run(preempt_once(database, {}, tmp))
    return float(found["wait_s"])


def _rounds(backend: str, rounds: int) -> list[float]:
    waits = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "sqlite":
                waits.append(_round(None, Path(tmp)))
            else:
                with postgres_database() as url:
                    waits.append(_round(url, Path(tmp)))
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    args = parser.parse_args()
    figures: dict[str, Any] = {"bench": "preemption", "rounds": args.rounds}
    for backend in args.backends:
        if backend == "postgresql" and not reachable("127.0.0.1", 5432):
            figures[backend] = "skipped: unreachable"
            continue
        figures[backend] = _quantiles(_rounds(backend, args.rounds))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
