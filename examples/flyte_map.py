"""A flytekit workflow with a map_task, a sub-workflow and a launch plan called as a node, run
by sluice with no Flyte cluster (docs/flyte.md, "Map tasks, sub-workflows, launch plans called
as nodes, @dynamic").

    pip install 'sluice[flyte]'
    python examples/flyte_map.py
    sluice run examples/flyte_map.py:report -i 'words=["map", "task", "on", "sluice"]'

The map_task runs as ONE sluice map node whose items are child nodes (`n1[0]`, `n1[1]`, ...),
each running `score` through flytekit in sluice's workers, at most 2 at once; `bonus` is
fixed for every item by functools.partial. `cleaned` is inlined (its nodes are `n0-n0`...);
`summary_plan` starts a child execution under its own concurrency policy.
"""

from __future__ import annotations

import functools

from flytekit import LaunchPlan, map_task, task, workflow


@task
def clean(words: list[str]) -> list[str]:
    return [w.strip().lower() for w in words if w.strip()]


@workflow
def cleaned(words: list[str]) -> list[str]:
    return clean(words=words)


@task(cache=True, cache_version="1")
def score(word: str, bonus: int) -> int:
    return len(word) + bonus


@task
def total(scores: list[int]) -> int:
    return sum(scores)


@workflow
def summary(scores: list[int]) -> int:
    return total(scores=scores)


summary_plan = LaunchPlan.get_or_create(summary, name="summary_plan")


@workflow
def report(words: list[str] = ["Map ", "task", "", "ON", "sluice"]) -> int:  # noqa: B006
    scores = map_task(functools.partial(score, bonus=100), concurrency=2)(word=cleaned(words=words))
    return summary_plan(scores=scores)


if __name__ == "__main__":
    import os
    import sys

    # `sluice run` loads this file again: in a fresh process, as flytekit names launch plans
    # once per process (this one already made `summary_plan` as __main__'s)
    os.execv(sys.executable, [sys.executable, "-m", "sluice", "run", f"{__file__}:report"])
