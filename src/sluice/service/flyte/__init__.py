"""`FlyteAdmin`: the verbs behind flyteadmin's gRPC API (sluice.flyteadmin), over one `Sluice`.

Flyte's clients register tasks, workflows and launch plans (kept as they sent them, see
registry.py), upload code and files (code.py), launch executions of registered launch plans
(launching.py: ordinary sluice executions) and read them back as Flyte shows them (views.py).
The caller's scope applies as to every other verb: reads outside its projects find nothing,
writes need a writing scope on the project.

flyteidl is imported by the functions that need it, so this package loads without the `flyte`
extra (the adapter that calls it does need it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice.errors import NotFoundError, PermissionDeniedError
from sluice.service.flyte import launching, registry, views
from sluice.service.flyte.code import FlyteFiles, UploadGrant
from sluice.service.flyte.graph import FlyteId, parse, task_references
from sluice.spec.names import check_scope_name
from sluice.store.flyte_entities import TASK, FlyteEntityRecord, FlyteEntityRepository

if TYPE_CHECKING:
    from sluice.service.facade import Sluice

DOMAINS = ("development", "staging", "production")
"""Flyte's default domains, listed with the configured one."""


class FlyteAdmin:
    def __init__(self, sluice: Sluice) -> None:
        self.sluice = sluice
        self.runtime = sluice.runtime
        self.files = FlyteFiles(self.runtime.data_dir)

    # Projects.
    async def projects(self) -> list[tuple[str, list[str]]]:
        """Projects (with their domains) that hold Flyte entities or executions, and the
        configured one; only the caller's."""
        settings = self.runtime.settings
        known = {settings.project: {*DOMAINS, settings.domain}}
        async with self.runtime.store.read() as repos:
            pairs = await FlyteEntityRepository(repos.conn).projects()
        for project, domain in pairs:
            known.setdefault(project, set(DOMAINS)).add(domain)
        scope = self.sluice.scope
        return [
            (p, sorted(d, key=_domain_order)) for p, d in sorted(known.items()) if scope.sees(p)
        ]

    def domains(self) -> list[str]:
        return sorted({*DOMAINS, self.runtime.settings.domain}, key=_domain_order)

    # Entities.
    async def register(self, ident: FlyteId, spec: Any) -> bool:
        """Register a task, workflow or launch plan; False: that spec was already there."""
        self._may_write(ident.project)
        return await registry.register(self.runtime, self.files, ident, spec)

    async def entity(self, ident: FlyteId) -> FlyteEntityRecord:
        self._may_read(ident.project)
        return await registry.get(self.runtime, ident)

    async def entities(
        self,
        kind: str,
        project: str,
        domain: str,
        name: str | None = None,
        *,
        active_only: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[FlyteEntityRecord]:
        """Versions newest first."""
        self._may_read(project)
        state = "ACTIVE" if active_only else None
        async with self.runtime.store.read() as repos:
            return await FlyteEntityRepository(repos.conn).list(
                kind, project, domain, name, state=state, limit=limit, offset=offset
            )

    async def entity_names(
        self, kind: str, project: str, domain: str, *, limit: int = 100, offset: int = 0
    ) -> list[str]:
        self._may_read(project)
        async with self.runtime.store.read() as repos:
            return await FlyteEntityRepository(repos.conn).names(
                kind, project, domain, limit=limit, offset=offset
            )

    async def workflow_tasks(self, workflow: Any) -> list[Any]:
        """The task specs a workflow spec's nodes (and its sub-workflows') run."""
        found: dict[FlyteId, Any] = {}
        async with self.runtime.store.read() as repos:
            repo = FlyteEntityRepository(repos.conn)
            for template in [workflow.template, *workflow.sub_workflows]:
                for kind, reference in task_references(template):
                    ident = FlyteId.of(kind, reference)
                    if kind != TASK or ident in found:
                        continue
                    record = await repo.get(*ident.key)
                    if record is not None:
                        found[ident] = parse(TASK, record.spec)
        return list(found.values())

    async def set_launch_plan_state(self, ident: FlyteId, *, active: bool) -> None:
        self._may_write(ident.project)
        await registry.set_state(self.runtime, self.files, ident, active)

    # Executions.
    async def create_execution(
        self,
        project: str,
        domain: str,
        name: str,
        target: FlyteId,
        inputs: Any,
        *,
        overwrite_cache: bool = False,
    ) -> views.FlyteExecution:
        check_scope_name("project", project)
        check_scope_name("domain", domain)
        self._may_write(project)
        record = await launching.create(
            self.runtime,
            self.files,
            project,
            domain,
            name,
            target,
            inputs,
            overwrite_cache=overwrite_cache,
        )
        return await self._view(record.id)

    async def execution(self, project: str, domain: str, name: str) -> views.FlyteExecution:
        found = await self._view(name)
        if (found.record.project, found.record.domain) != (project, domain):
            raise NotFoundError(f"execution {project}/{domain}/{name} does not exist")
        return found

    async def executions(
        self, project: str, domain: str, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[views.FlyteExecution], str | None]:
        """Newest first, a page at a time."""
        from sluice.service.executions import ExecutionFilter

        self._may_read(project)
        where = ExecutionFilter(projects=[project], domain=domain)
        page = await self.sluice.executions(where, limit=limit, cursor=cursor)
        found = [await self._view(summary.id) for summary in page.items]
        return found, page.next_cursor

    async def terminate(self, project: str, domain: str, name: str, cause: str) -> None:
        await self.execution(project, domain, name)
        await self.sluice.abort(name, cause or "terminated", wait=False)

    async def nodes(
        self, project: str, domain: str, name: str, parent: str = ""
    ) -> list[views.FlyteNode]:
        execution = await self.execution(project, domain, name)
        async with self.runtime.store.read() as repos:
            if parent:
                records = await repos.nodes.list(execution.record.id)
                if any(r.node_id == parent for r in records):  # a branch: the case taken
                    return views.branch_children(records, parent)
            return await views.flyte_nodes(repos, execution, parent)

    async def node(self, project: str, domain: str, name: str, node_id: str) -> views.FlyteNode:
        parent = node_id.rpartition("-")[0] if "-" in node_id else ""
        for node in await self.nodes(project, domain, name, parent):
            if node.node_id == node_id:
                return node
        raise NotFoundError(f"execution {name} has no node execution {node_id!r}")

    async def _view(self, execution_id: str) -> views.FlyteExecution:
        from sluice.service import executions as ex

        async with self.runtime.store.read() as repos:
            record = await ex.by_id_or_prefix(repos, execution_id, self.sluice.scope.projects)
            if record.id != execution_id:  # Flyte names are exact
                raise NotFoundError(f"execution {execution_id!r} does not exist")
            return await views.flyte_execution(repos, record)

    # Files.
    def upload_location(
        self,
        project: str,
        domain: str,
        filename: str,
        content_md5: bytes,
        filename_root: str = "",
        expires_in: float | None = None,
    ) -> UploadGrant:
        check_scope_name("project", project)
        check_scope_name("domain", domain)
        self._may_write(project)
        return self.files.grant(
            project, domain, filename, content_md5, filename_root, expires_in, self.sluice.now()
        )

    async def store_upload(
        self, path: str, expires: float, md5: str, signature: str, body: AsyncIterator[bytes]
    ) -> Path:
        """Write an upload whose location this server signed (the signature is the
        credential: the HTTP route needs no token)."""
        return await self.files.store(path, expires, md5, signature, body, self.sluice.now())

    # Scope.
    def _may_read(self, project: str) -> None:
        if not self.sluice.scope.sees(project):
            raise NotFoundError(f"project {project!r} does not exist")

    def _may_write(self, project: str) -> None:
        if self.sluice.scope.read_only:
            raise PermissionDeniedError("this token is read-only")
        self._may_read(project)


def _domain_order(domain: str) -> tuple[int, str]:
    return (DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS), domain)


__all__ = ["FlyteAdmin", "FlyteId", "UploadGrant"]
