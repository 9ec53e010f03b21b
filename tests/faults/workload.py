"""Workflows of the fault tests, all run by the probe plugin (probe.py), whose bodies record
the history. Loaded from this file by the tests and by the engine processes."""

from __future__ import annotations

import sluice

QUOTA = "faults-q"  # quota 1 (config of every runtime of these tests)
PAIR = "faults-pair"  # quota 2


@sluice.task(type="probe", quotas=[sluice.Quota(QUOTA)])
def held(history: str, seconds: float, fails: int, hold: str) -> int: ...


@sluice.task(type="probe", quotas=[sluice.Quota(PAIR)], retries=3)
def paired(history: str, seconds: float, fails: int, hold: str) -> int: ...


@sluice.task(type="probe", quotas=[sluice.Quota(QUOTA)])
def held_after(history: str, seconds: float, fails: int, hold: str, after: int) -> int: ...


@sluice.task(type="probe", cache=sluice.Cache(version="1", serialize=True))
def computed(history: str, seconds: float, fails: int, hold: str) -> int: ...


@sluice.task(type="probe", locks="part/{p}", retries=3)
def locked(history: str, seconds: float, fails: int, hold: str, p: int) -> int: ...


@sluice.task(type="probe", quotas=[sluice.Quota(QUOTA)], priority=10)
def urgent(history: str, seconds: float, fails: int, hold: str) -> int: ...


@sluice.task(type="probe", retries=3)
def flaky(history: str, seconds: float, fails: int, hold: str) -> int: ...


@sluice.workflow
def one_held(history: str, seconds: float = 0.3, fails: int = 0, hold: str = "") -> int:
    return held(history=history, seconds=seconds, fails=fails, hold=hold)


@sluice.workflow
def one_urgent(history: str, seconds: float = 0.3) -> int:
    """A priority-10 task under the quota of 1 (preemption tests)."""
    return urgent(history=history, seconds=seconds, fails=0, hold="")


@sluice.workflow
def one_computed(history: str, seconds: float = 0.3, hold: str = "") -> int:
    return computed(history=history, seconds=seconds, fails=0, hold=hold)


@sluice.workflow
def lifecycle(history: str, seconds: float = 0.3, hold: str = "") -> int:
    """A serializable cached task, then a task under the quota of 1: every crash point."""
    first = computed(history=history, seconds=seconds, fails=0, hold=hold)
    return held_after(history=history, seconds=seconds, fails=0, hold="", after=first)


@sluice.workflow
def mixed(history: str, tag: int, p: int, cache_seconds: float, seconds: float = 0.4) -> None:
    """One of everything the kill loop mixes: a retried failure, the quotas of 1 and 2, the
    shared cached task (the same inputs in every execution of one wave: `cache_seconds` is the
    wave's), a lock keyed by partition."""
    flaky(history=history, seconds=seconds, fails=1, hold="")
    held(history=history, seconds=seconds, fails=0, hold="")
    paired(history=history, seconds=seconds, fails=1, hold="")
    computed(history=history, seconds=cache_seconds, fails=0, hold="")
    locked(history=history, seconds=seconds, fails=0, hold="", p=p)


@sluice.workflow
def one_flaky(history: str, fails: int, seconds: float = 0.1) -> int:
    return flaky(history=history, seconds=seconds, fails=fails, hold="")
