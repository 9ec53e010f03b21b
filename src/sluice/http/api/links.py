"""OpenAPI links from an answer that names an execution to what a client can do with it next
(read it, its nodes and events, abort it): clients, and the schema's stateful tests, follow
them. Following its log is left out: the stream lasts as long as the execution."""

from __future__ import annotations

from typing import Any

_PREFIX = "api_v1_executions__execution_id_"
_NEXT = {
    "execution": f"get_execution_{_PREFIX}_get",
    "nodes": f"list_nodes_{_PREFIX}_nodes_get",
    "events": f"list_events_{_PREFIX}_events_get",
    "abort": f"abort_execution_{_PREFIX}_abort_post",
    "relaunch": f"relaunch_execution_{_PREFIX}_relaunch_post",
}


def execution_links(status: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` entry of a route answering `status` with an execution summary."""
    links = {
        name: {"operationId": operation, "parameters": {"execution_id": "$response.body#/id"}}
        for name, operation in _NEXT.items()
    }
    return {status: {"links": links}}
