"""The garbage collector while a run drives its engine in the caller's process.

A fan-out of 1,000 tasks allocates enough surviving objects (node states, records, events,
futures) to trigger a full collection, which walks every object of the process: the
caller's program and everything imported (SQLAlchemy, pydantic), 80,000-130,000 objects.
Measured, that one collection took 0.1-0.24 s of a fan-out whose engine used 0.5-0.7 s of
CPU, and the young ones most of another 0.04 s.

For the run, young collections run every 10,000 net allocations of tracked objects instead
of 700 (the default). Middle and full collections, which follow every 10 of the generation
below, become as much rarer, so a run of a few thousand tasks meets none. Cyclic garbage is
still collected during the run, in larger batches; reference counting frees the rest as
always. The threshold is restored after the run.

(`gc.freeze()` of what existed before the run was measured too: no better in CPU, and
telling whether the caller froze objects itself, so as not to undo it, costs a walk of
every frozen object: `gc.get_freeze_count()` is O(n).)

The threshold is process-wide, so it is only raised when nobody raised it already, and only
restored if it is still the value set here: an inner or concurrent run, or a caller that set
its own, is left alone.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 10_000
"""Net allocations of tracked objects between two young collections during a run."""


@contextlib.contextmanager
def collector_for_run() -> Iterator[None]:
    """Collect young objects less often for the block."""
    threshold = gc.get_threshold()
    raised = 0 < threshold[0] < YOUNG_THRESHOLD
    if raised:
        gc.set_threshold(YOUNG_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        if raised and gc.get_threshold()[0] == YOUNG_THRESHOLD:
            gc.set_threshold(*threshold)
