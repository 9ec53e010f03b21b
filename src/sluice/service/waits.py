"""Where a waiting node stands, read once and shown the same everywhere.

A node waiting for quotas has a position in each namespace's queue. That position is the
resource manager's: its snapshot of a namespace ranks the waiters (first request, then
priority) and numbers them from 1, the same ranking its admission rule walks when it refuses
a claim. This module is the service's only reader of it: the execution view (API, CLI, UI
node table and attempts), and the quota views take their positions from the same snapshot,
read now. What a node's stored reason or an event says was true when it was written (the
engine writes the refusal it got); surfaces show it as history, never as the current place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sluice.resources import NamespaceSnapshot
from sluice.resources.models import WaiterInfo
from sluice.service import models as m

if TYPE_CHECKING:
    from sluice.runtime import Runtime

WAITING_FOR_RESOURCES = "WAITING_FOR_RESOURCES"


def waits_of(
    snapshots: Iterable[NamespaceSnapshot], execution_id: str, nodes: set[str]
) -> dict[str, list[m.Wait]]:
    """Each of `nodes` (of one execution) with the quotas it waits for, by node id."""
    waits: dict[str, list[m.Wait]] = {}
    for snapshot in snapshots:
        for waiter in snapshot.waiters:
            if waiter.execution_id == execution_id and waiter.node_id in nodes:
                waits.setdefault(waiter.node_id, []).append(wait(snapshot, waiter))
    return waits


def wait(snapshot: NamespaceSnapshot, waiter: WaiterInfo) -> m.Wait:
    return m.Wait(
        namespace=snapshot.namespace,
        in_use=snapshot.in_use,
        quota=snapshot.quota,
        holders=[f"{h.execution_id}/{h.node_id}" for h in snapshot.holders],
        position=waiter.position,
        blocking_scope=waiter.blocking_scope,
    )


async def with_waits(runtime: Runtime, execution: m.Execution) -> m.Execution:
    """The execution with each node that waits for resources given its waits as they are
    now (one read of the resource manager), and its live attempt the same reason."""
    waiting = {n.node for n in execution.nodes if n.task_phase == WAITING_FOR_RESOURCES}
    if not waiting:
        return execution
    await runtime.resources.start()
    waits = waits_of(await runtime.resources.describe(), execution.id, waiting)
    nodes = [_waiting(n, waits.get(n.node, [])) for n in execution.nodes]
    return execution.model_copy(update={"nodes": nodes})


def _waiting(node: m.NodeExecution, waits: list[m.Wait]) -> m.NodeExecution:
    if not waits:
        return node
    node = node.model_copy(update={"waiting_for": waits})
    attempts = list(node.attempts)
    if attempts and attempts[-1].live:
        attempts[-1] = attempts[-1].model_copy(update={"reason": node.live_reason})
    return node.model_copy(update={"attempts": attempts})
