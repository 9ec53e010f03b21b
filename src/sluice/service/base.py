"""What every verb of the service shares: the runtime, the caller's scope, and the checks
that keep a scoped caller to its projects (reads outside them find nothing, writes outside
them are refused the same way)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.errors import NotFoundError, PermissionDeniedError
from sluice.service import convert
from sluice.service import executions as ex
from sluice.service import models as m
from sluice.service.requests import Scope
from sluice.spec.names import check_scope_name
from sluice.store.records import ExecutionRecord

if TYPE_CHECKING:
    from sluice.config import Settings
    from sluice.runtime import Runtime


DECISION_WAIT = 15.0
"""Seconds a launch waits for the controller's decision about a new execution."""


class ServiceBase:
    def __init__(self, runtime: Runtime, scope: Scope | None = None) -> None:
        self.runtime = runtime
        self.scope = scope or Scope()

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    def now(self) -> float:
        return self.runtime.clock.now()

    async def _get(self, execution_id: str) -> ExecutionRecord:
        async with self.runtime.store.read() as repos:
            return await ex.by_id_or_prefix(repos, execution_id, self.scope.projects)

    async def _summary(self, record: ExecutionRecord) -> m.ExecutionSummary:
        async with self.runtime.store.read() as repos:
            positions = await ex.pending_positions(repos, [record])
        return convert.execution_summary(record, self.now(), positions.get(record.id))

    # Scope.
    @property
    def _seen(self) -> frozenset[str] | None:
        """The projects whose holders, waiters and entries this caller sees (None: all)."""
        return self.scope.projects

    def _project_domain(self, project: str | None, domain: str | None) -> tuple[str, str]:
        project = project or self._default_project()
        domain = domain or self.settings.domain
        check_scope_name("project", project)
        check_scope_name("domain", domain)
        return project, domain

    def _default_project(self) -> str:
        """A caller limited to one project works in it unless it names another; others in
        the configured project."""
        projects = self.scope.projects
        if projects is not None and len(projects) == 1:
            return next(iter(projects))
        return self.settings.project

    def _may_read(self, project: str) -> None:
        if not self.scope.sees(project):
            raise NotFoundError(f"project {project!r} does not exist")

    def _may_write(self, project: str | None) -> None:
        """Writes need a writing scope; one naming a project needs that project (a global
        write, such as a quota, needs an unscoped caller)."""
        if self.scope.read_only:
            raise PermissionDeniedError("this token is read-only")
        if project is None:
            if self.scope.projects is not None:
                raise PermissionDeniedError(
                    "only an unscoped caller may change deployment settings"
                )
            return
        self._may_read(project)
