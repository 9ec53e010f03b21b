"""Whole values: an execution's or a node's inputs or outputs as stored. Views cut big values
(`truncated` says which); these routes answer the whole of one."""

from __future__ import annotations

from typing import Any, Literal

from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import ExecutionId, NodeId

router = api_routes(tags=["executions"])
Side = Literal["inputs", "outputs"]


@router.get("/executions/{execution_id}/values/{side}")
async def execution_value(
    sluice: Service, execution_id: ExecutionId, side: Side
) -> dict[str, Any] | None:
    """The execution's whole inputs, or outputs (null until it succeeds)."""
    return await sluice.value(execution_id, side)


@router.get("/executions/{execution_id}/nodes/{node_id}/values/{side}")
async def node_value(
    sluice: Service, execution_id: ExecutionId, node_id: NodeId, side: Side
) -> dict[str, Any] | None:
    """A node's whole inputs (null before it starts), or outputs (null until it succeeds)."""
    return await sluice.value(execution_id, side, node_id)
