"""The verb "create": an execution of a launch plan's ACTIVE version, optionally under an
idempotency key, and the controller's decision about it."""

from __future__ import annotations

from typing import TypedDict

from sluice.executions.launch import merge_inputs
from sluice.executions.launch_plans import LaunchPlanService
from sluice.runtime import Runtime
from sluice.service import payloads
from sluice.service.base import DECISION_WAIT
from sluice.service.inputs import Inputs, resolve_inputs
from sluice.service.local import await_decision, controller_only, drive_here, until_terminal
from sluice.spec.names import check_entity_name
from sluice.store.records import ExecutionRecord


class CreateOptions(TypedDict, total=False):
    """The keyword arguments of `Sluice.create` (and `create_launched`)."""

    project: str | None
    domain: str | None
    wait: bool
    idempotency_key: str | None


async def create(
    runtime: Runtime,
    launch_plans: LaunchPlanService,
    launch_plan: str,
    inputs: Inputs,
    *,
    wait: bool = False,
    idempotency_key: str | None = None,
) -> tuple[ExecutionRecord, bool]:
    """The execution (with the controller's decision, or driven to its end with `wait`) and
    whether an idempotency key had created it already (then nothing new was written, and it
    is returned as it is now)."""
    check_entity_name("launch plan name", launch_plan)
    spec, workflow = await launch_plans.active(launch_plan)
    values = resolve_inputs(workflow, inputs)
    merge_inputs(workflow, values, spec)  # every input error before anything is written
    payloads.check_inputs_size(values, runtime.settings.payloads.max_inputs_bytes)
    project, domain = launch_plans.project, launch_plans.domain
    if idempotency_key is None:
        record = await runtime.launch_spec(workflow, spec, values, project=project, domain=domain)
        replayed = False
    else:
        target = f"launch_plan:{launch_plan}"
        launched = await runtime.launch_spec_once(
            workflow, spec, values, idempotency_key, target=target, project=project, domain=domain
        )
        record, replayed = launched.record, launched.replayed
    if replayed and not wait:
        return record, True
    async with drive_here(runtime, record) if wait else controller_only(runtime, record):
        record = await await_decision(runtime, record.id, DECISION_WAIT)
        if wait and not record.phase.is_terminal:
            record = await until_terminal(runtime, record.id, None)
    return record, replayed
