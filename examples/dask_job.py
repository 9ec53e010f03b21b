"""Dask tasks: each `type="dask"` task runs on a `distributed` cluster.

    pip install 'sluice[dask]'
    python examples/dask_job.py                  # a local Dask cluster, started and stopped here
    sluice run examples/dask_job.py:word_counts  # the same, through the CLI

With `plugins.config.dask.address = "tcp://SCHEDULER:8786"` (or `DaskJobConfig(address=...)`)
the tasks go to that scheduler instead; its workers need sluice and this module importable.
"""

from __future__ import annotations

import sluice
from sluice.plugins.dask import DaskJobConfig

LOCAL = DaskJobConfig(workers=2, threads=1)
TEXT = "the quick brown fox jumps over the lazy dog the fox"


@sluice.task(type="dask", custom=LOCAL)
def count_words(text: str, part: int, parts: int) -> dict[str, int]:
    words = text.split()[part::parts]
    print(f"part {part}: {len(words)} words")  # captured on the worker, in the task's log
    counts: dict[str, int] = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return counts


@sluice.task
def merge(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in counts:
        for word, n in part.items():
            total[word] = total.get(word, 0) + n
    return dict(sorted(total.items(), key=lambda item: -item[1]))


@sluice.workflow
def word_counts(text: str = TEXT) -> dict[str, int]:
    return merge(counts=[count_words(text=text, part=p, parts=3) for p in range(3)])


if __name__ == "__main__":
    raise SystemExit(sluice.main(["run", f"{__file__}:word_counts"]))
