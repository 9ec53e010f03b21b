"""Answering a gate (spec/gates.py): `sluice executions signal EXEC NODE VALUE`, the API.

The value is checked against the gate's type and written as an event of the node (phase
SIGNALED), with nothing else: the engine that drives the execution finds it at the gate's
next look, whichever engine that is and however often it restarted. Only a gate that is
waiting may be answered; a second answer to the same gate is refused.
"""

from __future__ import annotations

from typing import Any

from sluice.errors import InputError, InvalidArgumentError, NotFoundError
from sluice.spec.compound import node_order
from sluice.spec.gates import SIGNALED_EVENT, gate_options, is_gate
from sluice.spec.models import TaskSpec
from sluice.spec.phases import NodePhase
from sluice.spec.types import validate_json
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.records import EventRecord, ExecutionRecord
from sluice.store.store import Repos


async def signal_gate(
    repos: Repos,
    notifier: Notifier | None,
    record: ExecutionRecord,
    node_id: str,
    value: Any,
    now: float,
) -> EventRecord:
    """Write `value` as the answer to the gate `node_id` of the execution; the event written.
    NotFoundError for an unknown node, InvalidArgumentError for a node that is no waiting
    gate or is answered already, InputError for a value of the wrong type."""
    node = await repos.nodes.get(record.id, node_id)
    if node is None:
        raise NotFoundError(f"execution {record.id} has no node {node_id!r}")
    task = await _task_of(repos, record, node_id)
    if task is None or not is_gate(task):
        raise InvalidArgumentError(f"node {node_id!r} of {record.id} is not a gate")
    options = gate_options(task)
    if options.kind == "sleep":
        raise InvalidArgumentError(f"node {node_id!r} is a sleep: it waits for no signal")
    if node.phase is not NodePhase.RUNNING or record.phase.is_terminal:
        raise InvalidArgumentError(
            f"node {node_id!r} of {record.id} is {node.phase.value}, not waiting for a signal"
        )
    if await repos.events.of_node(record.id, node_id, SIGNALED_EVENT):
        raise InvalidArgumentError(f"node {node_id!r} of {record.id} was signalled already")
    where = f"signal for {options.signal_id!r} (node {node_id!r})"
    checked = validate_json(options.value_type(), value, where)
    event = EventRecord(
        record.id,
        SIGNALED_EVENT,
        now,
        node_id=node_id,
        attempt=node.attempt,
        reason=f"{options.signal_id!r} signalled: {checked!r}",
        info={"value": checked},
    )
    await repos.events.append([event])
    if notifier is not None:
        await notifier.publish(repos.conn, EXECUTIONS_CHANNEL, record.id)
    return event


def parse_signal_value(text: str) -> Any:
    """A signal's value as typed on a command line: JSON if it parses (5, true, "x", [1]),
    else the text itself (a bare string)."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


async def _task_of(repos: Repos, record: ExecutionRecord, node_id: str) -> TaskSpec | None:
    """The task of a node of the execution: of its workflow, or of a workflow one of its
    dynamic or branch nodes built (a gate in a branch's case)."""
    workflow = await repos.specs.get_workflow(
        record.project, record.domain, record.workflow_name, record.workflow_version
    )
    if workflow is None:
        raise InputError(f"execution {record.id}: its workflow is not stored")
    stored = {n.node_id: (n.inputs, n.outputs) for n in await repos.nodes.list(record.id)}
    shown = next((n for n in node_order(workflow, stored) if n.id == node_id), None)
    return shown.task if shown is not None else None
