"""The service's verbs for launching again: a form for a launch plan's (or an execution's)
inputs and a launch from it, a relaunch of an execution with its inputs (edited or not), and
a retry of a failed execution from its failed nodes, reusing the nodes that succeeded. A
relaunch or a retry is a new execution that names the one it came from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.executions.launch import claim_limits, create_execution, merge_inputs
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.policies import launch_plan_spec
from sluice.ids import new_execution_id
from sluice.service import launch_forms, payloads
from sluice.service import models as m
from sluice.service.base import DECISION_WAIT
from sluice.service.browse_verbs import Browsing
from sluice.service.launch_forms import LaunchForm
from sluice.service.local import await_decision, controller_only, drive_here, until_terminal
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.spec.names import check_entity_name
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord

RETRYABLE = frozenset({ExecutionPhase.FAILED, ExecutionPhase.ABORTED, ExecutionPhase.TIMED_OUT})


class Launching(Browsing):
    async def launch_form(
        self, launch_plan: str, *, project: str | None = None, domain: str | None = None
    ) -> LaunchForm:
        """The form of the ACTIVE version of `launch_plan`: its workflow's inputs with the
        plan's defaults, its fixed inputs shown as fixed."""
        project, domain = self._project_domain(project, domain)
        self._may_read(project)
        check_entity_name("launch plan name", launch_plan)
        plan, workflow = await self._active(project, domain, launch_plan)
        return self._form(workflow, plan, project, domain, {})

    async def relaunch_form(self, execution_id: str) -> LaunchForm:
        """The form of an execution's own workflow and launch plan versions, filled with its
        inputs, to launch it again (as it was, or edited)."""
        record = await self._get(execution_id)
        workflow, plan = await self._definitions(record)
        given = launch_forms.given_inputs(workflow, plan, record.inputs)
        form = self._form(workflow, plan, record.project, record.domain, given)
        return form.model_copy(update={"relaunch_of": record.id})

    async def launch_from_form(
        self,
        texts: Mapping[str, str],
        *,
        launch_plan: str | None = None,
        relaunch_of: str | None = None,
        project: str | None = None,
        domain: str | None = None,
    ) -> m.ExecutionSummary:
        """Launch with inputs as a form typed them (FormErrors names each bad field): the
        ACTIVE version of `launch_plan`, or the versions `relaunch_of` ran (linked to it)."""
        if relaunch_of is not None:
            old = await self._get(relaunch_of)
            workflow, plan = await self._definitions(old)
            project, domain, options = old.project, old.domain, {"relaunch_of": old.id}
        elif launch_plan is not None:
            project, domain = self._project_domain(project, domain)
            check_entity_name("launch plan name", launch_plan)
            self._may_read(project)
            plan, workflow = await self._active(project, domain, launch_plan)
            options = {}
        else:
            raise InvalidArgumentError("a launch needs a launch plan or an execution to relaunch")
        self._may_write(project)
        values = launch_forms.parse_fields(workflow, plan, texts)
        payloads.check_inputs_size(values, self.settings.payloads.max_inputs_bytes)
        record = await self.runtime.launch_spec(
            workflow, plan, values, project=project, domain=domain, options=options
        )
        return await self._decided(record)

    async def relaunch(
        self, execution_id: str, inputs: Mapping[str, Any] | None = None
    ) -> m.ExecutionSummary:
        """A new execution of the workflow and launch plan versions `execution_id` ran, with
        its inputs (those in `inputs` replaced), linked to it."""
        old = await self._get(execution_id)
        self._may_write(old.project)
        workflow, plan = await self._definitions(old)
        values = {**launch_forms.given_inputs(workflow, plan, old.inputs), **(inputs or {})}
        merge_inputs(workflow, values, plan)  # every input error before anything is written
        payloads.check_inputs_size(values, self.settings.payloads.max_inputs_bytes)
        record = await self.runtime.launch_spec(
            workflow,
            plan,
            values,
            project=old.project,
            domain=old.domain,
            options={**_kept_options(old), "relaunch_of": old.id},
        )
        return await self._decided(record)

    async def retry(self, execution_id: str, *, wait: bool = False) -> m.ExecutionSummary:
        """A new execution of a FAILED (ABORTED, TIMED_OUT) one's workflow and launch plan
        versions with its inputs, starting with every node that succeeded as it ended
        (SUCCEEDED, its recorded outputs): only the failed and never-run nodes run. With
        `wait`, driven here to its end if no engine takes it."""
        old = await self._get(execution_id)
        self._may_write(old.project)
        if old.phase not in RETRYABLE:
            raise InvalidArgumentError(
                f"execution {old.id} is {old.phase.value}: only a FAILED, ABORTED or TIMED_OUT "
                "execution can be retried from its failed nodes"
            )
        workflow, plan = await self._definitions(old)
        async with self.runtime.store.read() as repos:
            nodes = await repos.nodes.list(old.id)
        new_id = new_execution_id()
        record = await create_execution(
            self.runtime.store,
            self.runtime.notifier,
            self.runtime.clock,
            project=old.project,
            domain=old.domain,
            workflow=workflow,
            inputs=launch_forms.given_inputs(workflow, plan, old.inputs),
            launch_plan=plan,
            options={**_kept_options(old), "retry_of": old.id},
            execution_id=new_id,
            limits=claim_limits(self.runtime.resources, self.settings.resources),
            reused=launch_forms.reusable(nodes, workflow, old.id, new_id),
        )
        assert record is not None
        return await self._decided(record, wait)

    async def _decided(self, record: ExecutionRecord, wait: bool = False) -> m.ExecutionSummary:
        runtime = self.runtime
        async with drive_here(runtime, record) if wait else controller_only(runtime, record):
            record = await await_decision(runtime, record.id, DECISION_WAIT)
            if wait and not record.phase.is_terminal:
                record = await until_terminal(runtime, record.id, None)
        return await self._summary(record)

    def _form(
        self,
        workflow: WorkflowSpec,
        plan: LaunchPlanSpec | None,
        project: str,
        domain: str,
        given: Mapping[str, Any],
    ) -> LaunchForm:
        return LaunchForm(
            workflow=f"{workflow.name}@{workflow.version}",
            launch_plan=plan.name if plan else None,
            launch_plan_version=plan.version if plan else None,
            project=project,
            domain=domain,
            fields=launch_forms.fields_of(workflow, plan, given),
        )

    async def _active(
        self, project: str, domain: str, name: str
    ) -> tuple[LaunchPlanSpec, WorkflowSpec]:
        runtime = self.runtime
        service = LaunchPlanService(runtime.store, runtime.notifier, runtime.clock, project, domain)
        return await service.active(name)

    async def _definitions(
        self, record: ExecutionRecord
    ) -> tuple[WorkflowSpec, LaunchPlanSpec | None]:
        """The workflow and launch plan versions an execution ran."""
        async with self.runtime.store.read() as repos:
            workflow = await repos.specs.get_workflow(
                record.project, record.domain, record.workflow_name, record.workflow_version
            )
            stored = None
            if record.launch_plan and record.launch_plan_version:
                stored = await repos.launch_plans.get(
                    record.project, record.domain, record.launch_plan, record.launch_plan_version
                )
        if workflow is None:
            raise NotFoundError(f"workflow {record.workflow_key} of {record.id} is not registered")
        return workflow, launch_plan_spec(stored.spec) if stored else None


def _kept_options(record: ExecutionRecord) -> dict[str, Any]:
    """What a retry keeps of how the execution was launched (plugin overrides...), not its
    links to others."""
    return {k: v for k, v in record.options.items() if k not in ("relaunch_of", "retry_of")}
