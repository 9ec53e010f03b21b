"""The engine's wake-ups: a release wakes only the nodes the resource manager says may now be
granted, every waiting node when nobody queues, and a freed lock reopens in the scheduler."""

from __future__ import annotations

from sluice.clock import FakeClock
from sluice.config import EngineConfig
from sluice.engine.admission import NodeAdmission


def _scheduling() -> tuple[NodeAdmission, list[tuple[str, list[str]]]]:
    woken: list[tuple[str, list[str]]] = []
    scheduling = NodeAdmission(
        EngineConfig(workers=1),
        FakeClock(),
        lambda e, n: woken.append((e, list(n))),
        lambda e, n: None,
        None,
        {},
    )
    return scheduling, woken


def test_a_release_wakes_only_the_ready_tokens() -> None:
    scheduling, woken = _scheduling()
    for node in ("a", "b", "c"):
        scheduling.wait_for_resources(["warehouse"], "x1", node, f"tok-{node}")
    scheduling.on_resources("warehouse", ("tok-b",))
    assert woken == [("x1", ["b"])]


def test_without_a_queue_every_waiter_tries() -> None:
    scheduling, woken = _scheduling()
    for node in ("a", "b"):
        scheduling.wait_for_resources(["warehouse"], "x1", node, f"tok-{node}")
    scheduling.on_resources("warehouse", None)
    assert sorted(w[1][0] for w in woken) == ["a", "b"]


def test_a_freed_lock_reopens_in_the_scheduler() -> None:
    scheduling, _ = _scheduling()
    scheduling.scheduler.reject("x1/a", ["db/1"])
    assert "db/1" in scheduling.scheduler.busy_elsewhere()
    scheduling.on_resources("lock:db/1", None)
    assert "db/1" not in scheduling.scheduler.busy_elsewhere()
