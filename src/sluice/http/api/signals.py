"""Gates: answer one that waits (a flytekit `wait_for_input`'s value, an `approve`'s true or
false). The CLI's `sluice executions signal` calls the same service method."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import ExecutionId, NodeId
from sluice.service import models as m

router = api_routes(tags=["executions"])


class Signal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: Any
    """The gate's value, of the type it waits for (an approve gate: true or false)."""


@router.post("/executions/{execution_id}/nodes/{node_id}/signal", status_code=201)
async def signal_gate(
    sluice: Service, execution_id: ExecutionId, node_id: NodeId, body: Signal
) -> m.Event:
    """Give a waiting gate its value; the answer is the event that keeps it (422 for a node
    that is no waiting gate, one answered already, or a value of the wrong type)."""
    return await sluice.signal(execution_id, node_id, body.value)
