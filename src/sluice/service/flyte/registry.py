"""Registering Flyte entities and reading them back, and launch plan activation.

A registration is checked first (translated with what it references, its tasks' plugins
resolved), so what sluice cannot run is refused naming the construct before anything is
written; then written in one statement. A version is immutable: the same digest again is a
no-op, another digest under it an error naming the entity and the version.

Activating a Flyte launch plan version registers its translation as a sluice launch plan
version and makes it the ACTIVE one (so schedules fire and concurrency policies govern), in
the same transaction as Flyte's own ACTIVE/INACTIVE state.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sluice.errors import DefinitionError, NotFoundError
from sluice.executions.launch_plans import LaunchPlanService
from sluice.faults import crash_point
from sluice.runtime import Runtime
from sluice.service.flyte.code import FlyteFiles
from sluice.service.flyte.graph import FlyteId
from sluice.service.flyte.translate import translate
from sluice.spec.names import check_entity_name, check_scope_name
from sluice.store.flyte_entities import (
    ACTIVE,
    INACTIVE,
    LAUNCH_PLAN,
    FlyteEntityRecord,
    FlyteEntityRepository,
)


def check_id(ident: FlyteId) -> None:
    check_scope_name("project", ident.project)
    check_scope_name("domain", ident.domain)
    check_entity_name(f"{ident.kind.replace('_', ' ')} name", ident.name)
    check_entity_name("version", ident.version)


def digest_of(spec: Any) -> str:
    return hashlib.sha256(spec.SerializeToString(deterministic=True)).hexdigest()


async def register(runtime: Runtime, files: FlyteFiles, ident: FlyteId, spec: Any) -> bool:
    """Register one entity; False if that very spec was registered already."""
    check_id(ident)
    async with runtime.store.read() as repos:
        translated = await translate(FlyteEntityRepository(repos.conn), files, ident, spec)
    await runtime.check_tasks(translated.workflow, None)
    now = runtime.clock.now()
    record = FlyteEntityRecord(
        ident.kind,
        ident.project,
        ident.domain,
        ident.name,
        ident.version,
        digest_of(spec),
        spec.SerializeToString(deterministic=True),
        now,
        now,
        INACTIVE if ident.kind == LAUNCH_PLAN else None,
    )
    async with runtime.store.write() as repos:
        stored = await FlyteEntityRepository(repos.conn).put(record)
        crash_point("flyte.mid_register")
    crash_point("flyte.after_register")
    if stored is not None and stored.digest != record.digest:
        raise DefinitionError(
            f"{ident} is registered already with a different spec; versions are immutable, "
            "register a new version"
        )
    return stored is None


async def get(runtime: Runtime, ident: FlyteId) -> FlyteEntityRecord:
    async with runtime.store.read() as repos:
        found = await FlyteEntityRepository(repos.conn).get(
            ident.kind, ident.project, ident.domain, ident.name, ident.version
        )
    if found is None:
        raise NotFoundError(f"{ident} is not registered")
    return found


async def set_state(runtime: Runtime, files: FlyteFiles, ident: FlyteId, active: bool) -> None:
    """Activate a launch plan version (and its sluice translation), or deactivate it if it is
    the ACTIVE one; in one transaction."""
    record = await get(runtime, ident)
    translated = None
    if active:
        async with runtime.store.read() as repos:
            translated = await translate(FlyteEntityRepository(repos.conn), files, ident)
        assert translated.launch_plan is not None
    service = LaunchPlanService(
        runtime.store, runtime.notifier, runtime.clock, ident.project, ident.domain
    )
    now = runtime.clock.now()
    async with runtime.store.write() as repos:
        flyte = FlyteEntityRepository(repos.conn)
        if translated is not None and translated.launch_plan is not None:
            await service.register_within(
                repos, translated.launch_plan, translated.workflow, activate=True
            )
            await flyte.set_active(ident.project, ident.domain, ident.name, ident.version, now)
        elif record.state == ACTIVE:
            await service.deactivate_within(repos, ident.name)
            await flyte.set_active(ident.project, ident.domain, ident.name, None, now)
