"""A flyteidl launch plan -> a sluice LaunchPlanSpec (and the WorkflowSpec it launches).

Default inputs (parameters with a default) and fixed inputs become sluice's; the schedule's cron
expression or fixed rate becomes a Schedule (UTC, as Flyte's), its kickoff_time_input_arg the
input each firing sets to its nominal time; `concurrency_policy` becomes a
ConcurrencyPolicy. Flyte's proto knows only SKIP (and UNSPECIFIED, which sluice reads as SKIP,
the only behavior upstream has, rather than silently disabling the limit); sluice's WAIT and
REPLACE stay available on sluice launch plans.
"""

from __future__ import annotations

from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.entities import FlyteEntities
from sluice.flyte.workflows import workflow_spec
from sluice.plugins.builtin.flyte_literals import to_json
from sluice.spec.canonical import digest
from sluice.spec.models import (
    ConcurrencyBehavior,
    ConcurrencyPolicy,
    LaunchPlanSpec,
    Schedule,
    WorkflowSpec,
)

_RATE_UNIT_SECONDS = {0: 60.0, 1: 3600.0, 2: 86400.0}  # FixedRateUnit MINUTE, HOUR, DAY


def default_inputs(plan: Any) -> dict[str, Any]:
    """The JSON defaults of a launch plan's parameters (required ones have none)."""
    found = {}
    for name, parameter in plan.spec.default_inputs.parameters.items():
        if parameter.HasField("default"):
            where = f"launch plan {plan.id.name!r}: default input {name!r}"
            found[name] = to_json(parameter.default, parameter.var.type, where)
    return found


def launch_plan_spec(entities: FlyteEntities, plan: Any) -> tuple[WorkflowSpec, LaunchPlanSpec]:
    name = plan.id.name
    where = f"Flyte launch plan {name!r}"
    workflow_name = plan.spec.workflow_id.name
    workflow = workflow_spec(entities, workflow_name, _workflow_defaults(entities, workflow_name))
    types = {
        n: v.type
        for n, v in entities.workflow(workflow_name).template.interface.inputs.variables.items()
    }
    fixed = {
        k: to_json(v, types[k], f"{where}: fixed input {k!r}")
        for k, v in plan.spec.fixed_inputs.literals.items()
    }
    defaults = {k: v for k, v in default_inputs(plan).items() if k not in fixed}
    draft = LaunchPlanSpec(
        name=name,
        version="",
        workflow=f"{workflow.name}@{workflow.version}",
        default_inputs=defaults,
        fixed_inputs=fixed,
        schedule=_schedule(plan.spec.entity_metadata, where, dict(workflow.interface.inputs)),
        concurrency=_concurrency(plan.spec, where),
    )
    spec = draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})
    return workflow, spec


def _workflow_defaults(entities: FlyteEntities, workflow_name: str) -> dict[str, Any]:
    """The defaults of a workflow's own inputs: those of its default launch plan (flytekit
    names it after the workflow), if the entities have it."""
    plan = entities.launch_plans.get(workflow_name)
    return default_inputs(plan) if plan is not None else {}


def _schedule(metadata: Any, where: str, inputs: dict[str, Any]) -> Schedule | None:
    """The launch plan's schedule; its `kickoff_time_input_arg` must name a datetime input of
    the workflow (each firing sets it to its nominal time)."""
    if not metadata.HasField("schedule"):
        return None
    schedule = metadata.schedule
    kickoff = schedule.kickoff_time_input_arg or None
    if kickoff is not None and str(getattr(inputs.get(kickoff), "type", "")) != "datetime":
        raise DefinitionError(
            f"{where}: the schedule's kickoff_time_input_arg {kickoff!r} is not a datetime "
            f"input of the workflow (inputs: {sorted(inputs)})"
        )
    kind = schedule.WhichOneof("ScheduleExpression")
    if kind == "cron_schedule":
        if schedule.cron_schedule.offset:
            raise DefinitionError(f"{where}: a cron schedule offset is not supported yet")
        return Schedule(cron=schedule.cron_schedule.schedule, kickoff_input=kickoff)
    if kind == "cron_expression":
        return Schedule(cron=schedule.cron_expression, kickoff_input=kickoff)
    if kind == "rate":
        seconds = schedule.rate.value * _RATE_UNIT_SECONDS[schedule.rate.unit]
        return Schedule(fixed_rate=seconds, kickoff_input=kickoff)
    return None


def _concurrency(spec: Any, where: str) -> ConcurrencyPolicy | None:
    if not _has(spec, "concurrency_policy"):
        return None
    policy = spec.concurrency_policy
    if policy.max < 1:
        raise DefinitionError(f"{where}: concurrency_policy max must be >= 1, got {policy.max}")
    return ConcurrencyPolicy(max=policy.max, behavior=ConcurrencyBehavior.SKIP)


def _has(message: Any, field: str) -> bool:
    try:
        return bool(message.HasField(field))
    except ValueError:  # an older flyteidl without the field
        return False
