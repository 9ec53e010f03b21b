"""Map tasks: one node of a workflow runs a task on every item of a list, at most
`concurrency` at a time, each item with its own attempts, cache entry, quotas and locks
(here a token of the "scoring-api" quota, 2 at most).

    python examples/map_task.py
    SLUICE_RESOURCES__QUOTAS='{"scoring-api": 2}' \
        sluice run examples/map_task.py:scores --input 'names=["ada","bob","cy"]'

`min_success_ratio=0.75` lets up to a quarter of the items fail: the node still succeeds and
a failed item's result is None. Run it twice: the cached items are not computed again.
"""

from __future__ import annotations

import sluice

NAMES = ["ada", "grace", "linus", "barbara", "ken", "dennis", "fail-me", "margaret"]


@sluice.task(cache=sluice.Cache(version="1"), quotas=[sluice.Quota("scoring-api")])
def score(name: str, bonus: int) -> int:
    if name.startswith("fail"):
        raise ValueError(f"cannot score {name!r}")
    return sum(ord(ch) for ch in name) % 100 + bonus


@sluice.task
def best(scores: list[int | None]) -> int:
    return max(s for s in scores if s is not None)


@sluice.workflow
def scores(names: list[str] = NAMES, bonus: int = 10) -> int:
    mapped = sluice.map(score, concurrency=3, min_success_ratio=0.75)
    return best(scores=mapped(items=names, fixed={"bonus": bonus}))


if __name__ == "__main__":
    import os

    os.environ.setdefault("SLUICE_RESOURCES__QUOTAS", '{"scoring-api": 2}')
    raise SystemExit(sluice.main(["run", f"{__file__}:scores"]))
