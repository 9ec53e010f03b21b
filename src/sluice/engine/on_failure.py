"""A workflow's failure handler (spec OnFailure, Flyte's `on_failure`) in the engine.

The handler is a node of the workflow that waits for every other node. While the execution
goes on it never starts: once the others have all succeeded it is SKIPPED. When a node fails
the execution goes FAILING and the other nodes are stopped as usual, but not the handler:
once everything else is terminal it starts, its error input bound to the failure (the failed
node and its message), and runs as any node (attempts, retries, a restart resumes it). The
execution then ends FAILED with the first failure's error, whatever the handler did.
"""

from __future__ import annotations

from sluice.engine.state import ExecutionState, NodeState
from sluice.spec.phases import ExecutionPhase


def handler_of(ex: ExecutionState) -> NodeState | None:
    """The workflow's failure handler node, if it has one."""
    found = ex.workflow.on_failure
    return ex.nodes.get(found.node) if found is not None else None


def is_handler(ex: ExecutionState, node: NodeState) -> bool:
    found = ex.workflow.on_failure
    return found is not None and found.node == node.id


def may_start(ex: ExecutionState, node: NodeState) -> bool | None:
    """For the handler: True once it may run (the execution is FAILING and every other node
    is terminal), False while it must wait, None when it must be SKIPPED (the others all
    succeeded)."""
    if ex.record.phase is not ExecutionPhase.FAILING:
        return None if not node.waiting_on else False
    return all(ex.nodes[d].record.phase.is_terminal for d in node.dependencies)


def failure_value(ex: ExecutionState) -> dict[str, str]:
    """What the handler's error input receives: the first failed node and its message."""
    failed = sorted(
        (n for n in ex.nodes.values() if n.parent is None and n.record.phase.value == "FAILED"),
        key=lambda n: n.record.ended_at or 0,
    )
    if not failed:
        return {"failed_node_id": "", "message": ex.record.reason}
    error = failed[0].record.error or {}
    return {"failed_node_id": failed[0].id, "message": str(error.get("message", ""))}
