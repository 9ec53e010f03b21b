"""The executions one engine drives, and the queue of those with nodes to evaluate."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from sluice.engine.state import ExecutionState, NodeState


class OwnedExecutions:
    """Executions by id (leased to this engine) and the work queue the reconcile workers
    drain: an execution is queued at most once, with the nodes to look at in its `todo`."""

    def __init__(self) -> None:
        self.executions: dict[str, ExecutionState] = {}
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.queued: set[str] = set()

    def find(self, execution_id: str, node_id: str) -> tuple[ExecutionState, NodeState] | None:
        ex = self.executions.get(execution_id)
        if ex is None or node_id not in ex.nodes:
            return None
        return ex, ex.nodes[node_id]

    def enqueue(self, execution_id: str, node_ids: Iterable[str] | None = None) -> None:
        """Evaluate these nodes (every non-terminal one by default) at the next turn."""
        ex = self.executions.get(execution_id)
        if ex is None:
            return
        ex.todo.update(
            node_ids
            if node_ids is not None
            else [n.id for n in ex.nodes.values() if not n.record.phase.is_terminal]
        )
        if execution_id not in self.queued:
            self.queued.add(execution_id)
            self.queue.put_nowait(execution_id)

    async def next(self) -> ExecutionState | None:
        """The next queued execution (None when it was dropped meanwhile)."""
        execution_id = await self.queue.get()
        self.queued.discard(execution_id)
        return self.executions.get(execution_id)
