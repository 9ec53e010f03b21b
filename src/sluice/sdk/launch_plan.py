"""LaunchPlan: a named, versioned way to launch a workflow, with inputs, schedule, policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import DefinitionError, InputError
from sluice.sdk.interface import bind_arguments, input_annotations
from sluice.sdk.workflow import WorkflowDef
from sluice.spec.canonical import digest
from sluice.spec.compound import LAUNCH_PLAN_TYPE, LaunchPlanCall
from sluice.spec.models import (
    ConcurrencyPolicy,
    Interface,
    LaunchPlanSpec,
    Schedule,
    TaskSpec,
    WorkflowSpec,
)
from sluice.spec.names import check_entity_name
from sluice.spec.types import validate_json
from sluice.spec.values import check_priority


def check_launch_inputs(
    workflow: WorkflowSpec, values: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """Validate named JSON inputs against a workflow's interface, naming the bad one."""
    checked = {}
    for name, value in values.items():
        declared = workflow.interface.inputs.get(name)
        if declared is None:
            raise InputError(
                f"{where}: {workflow.name!r} has no input {name!r}; inputs are "
                f"{sorted(workflow.interface.inputs)}"
            )
        checked[name] = validate_json(declared.type, value, f"{where}: input {name!r}")
    return checked


class LaunchPlan:
    """Launch `workflow` with default inputs (overridable), fixed inputs (not overridable), an
    optional schedule, a concurrency policy and a priority."""

    def __init__(
        self,
        name: str,
        workflow: WorkflowDef[Any, Any],
        *,
        default_inputs: Mapping[str, Any] | None = None,
        fixed_inputs: Mapping[str, Any] | None = None,
        schedule: Schedule | None = None,
        concurrency: ConcurrencyPolicy | None = None,
        priority: int = 0,
        overwrite_cache: bool = False,
    ) -> None:
        check_entity_name("LaunchPlan name", name, DefinitionError)
        if not isinstance(workflow, WorkflowDef):
            raise DefinitionError(
                f"LaunchPlan {name!r}: workflow must be a @workflow, got {workflow!r}"
            )
        if concurrency is not None and not isinstance(concurrency, ConcurrencyPolicy):
            raise DefinitionError(f"LaunchPlan {name!r}: concurrency must be a ConcurrencyPolicy")
        if schedule is not None and not isinstance(schedule, Schedule):
            raise DefinitionError(f"LaunchPlan {name!r}: schedule must be a Schedule")
        check_priority(f"LaunchPlan {name!r}: priority", priority, DefinitionError)
        if not isinstance(overwrite_cache, bool):
            raise DefinitionError(
                f"LaunchPlan {name!r}: overwrite_cache must be a bool, got {overwrite_cache!r}"
            )
        for what, given in (("default_inputs", default_inputs), ("fixed_inputs", fixed_inputs)):
            if given is not None and not isinstance(given, Mapping):
                raise DefinitionError(
                    f"LaunchPlan {name!r}: {what} must be a dict of inputs, got {given!r}"
                )
        self.name = name
        self.workflow = workflow
        self.default_inputs = dict(default_inputs or {})
        self.fixed_inputs = dict(fixed_inputs or {})
        self.schedule = schedule
        self.concurrency = concurrency
        self.priority = priority
        self.overwrite_cache = overwrite_cache
        self._spec: LaunchPlanSpec | None = None

    @property
    def spec(self) -> LaunchPlanSpec:
        if self._spec is None:
            self._spec = self._build()
        return self._spec

    def _build(self) -> LaunchPlanSpec:
        wf = self.workflow.spec
        where = f"launch plan {self.name!r}"
        defaults = check_launch_inputs(wf, self.default_inputs, where)
        fixed = check_launch_inputs(wf, self.fixed_inputs, where)
        overlap = sorted(set(defaults) & set(fixed))
        if overlap:
            raise DefinitionError(f"{where}: input {overlap[0]!r} is both default and fixed")
        if self.schedule is not None:
            required = {n for n, spec in wf.interface.inputs.items() if not spec.has_default}
            kickoff = {self.schedule.kickoff_input} - {None}  # each firing sets it
            unset = sorted(required - set(defaults) - set(fixed) - kickoff)
            if unset:
                raise DefinitionError(
                    f"{where}: a scheduled launch plan needs a value for input {unset[0]!r} "
                    "(a default or fixed input): every firing would fail without one"
                )
        draft = LaunchPlanSpec(
            name=self.name,
            version="",
            workflow=f"{wf.name}@{wf.version}",
            default_inputs=defaults,
            fixed_inputs=fixed,
            schedule=self.schedule,
            concurrency=self.concurrency,
            priority=self.priority,
            overwrite_cache=self.overwrite_cache,
        )
        return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})

    def __call__(self, **inputs: Any) -> Any:
        """In a workflow: a node that starts an execution of this launch plan (its policy
        applies) and outputs that execution's outputs. Elsewhere: the workflow as Python."""
        from sluice.sdk.workflow import current_builder

        builder = current_builder()
        if builder is None:
            return self.workflow.fn(**{**self.default_inputs, **inputs, **self.fixed_inputs})
        spec = self.node_task()
        where = f"workflow {builder.name!r}: node {builder.next_id(spec)!r}"
        fixed = sorted(set(inputs) & set(self.fixed_inputs))
        if fixed:
            raise DefinitionError(
                f"{where}: input {fixed[0]!r} is fixed by launch plan {self.name!r}"
            )
        values = bind_arguments(self.workflow.fn, (), inputs, where)
        params = input_annotations(self.workflow.fn, where)
        return builder.add_node(spec, builder.bind_inputs(spec.interface, values, params, where))

    def node_task(self) -> TaskSpec:
        """The task spec of a node calling this launch plan: the workflow's inputs less the
        fixed ones (the launch plan's defaults as defaults), its outputs."""
        lp, wf = self.spec, self.workflow.spec
        inputs = {
            name: declared.model_copy(
                update={"default": lp.default_inputs[name], "has_default": True}
            )
            if name in lp.default_inputs
            else declared
            for name, declared in wf.interface.inputs.items()
            if name not in lp.fixed_inputs
        }
        draft = TaskSpec(
            name=f"launch_plan.{self.name}",
            version="",
            type=LAUNCH_PLAN_TYPE,
            interface=Interface(inputs=inputs, outputs=dict(wf.interface.outputs)),
            custom=LaunchPlanCall(launch_plan=lp, workflow=wf).model_dump(mode="json"),
        )
        return draft.model_copy(update={"version": digest(draft.model_dump(mode="json"))[:16]})

    def __repr__(self) -> str:
        return f"<launch plan {self.name}>"
