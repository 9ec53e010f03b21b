"""Which engine drives which execution: claims, leases, and takeover of dead owners."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Collection

from sluice.engine.services import EngineServices
from sluice.engine.state import ExecutionState
from sluice.ids import instance_pid
from sluice.spec.models import WorkflowSpec
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord
from sluice.store.store import Repos, Store


def dead_local_owner(owner: str | None) -> bool:
    """The owner was a process on this host that no longer exists: no need to wait out its
    lease. Errs towards alive: an id that names no (host, pid), another host, a pid we may
    not signal, or a pid that exists (even reused, even a zombie) all count as alive."""
    located = instance_pid(owner or "")
    if located is None or located[0] != socket.gethostname():
        return False
    try:
        os.kill(located[1], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Ownership:
    def __init__(
        self, services: EngineServices, store: Store, *, only: Collection[str] | None
    ) -> None:
        self.s = services
        self.store = store
        self.only = only
        self._workflows: dict[tuple[str, str, str], WorkflowSpec] = {}

    @property
    def engine_id(self) -> str:
        return self.s.engine_id

    async def claim(self, held: Collection[str], limit: int) -> list[ExecutionState]:
        """Take up to `limit` executions nobody alive holds, highest priority then oldest
        first; their loaded states.

        Nobody alive: no owner, a lapsed lease, or an owner that was a process on this host
        that no longer exists (its executions are released at once). An owner whose lease is
        live and that is not provably dead (another host, or a process that exists) is never
        taken from: a live engine on this host is never treated as dead.
        """
        now = self.s.clock.now()
        until = now + self.s.config.execution_lease
        taken: list[str] = []
        async with self.store.write() as repos:
            for owner in await repos.executions.other_owners(self.engine_id, now):
                if dead_local_owner(owner):
                    await repos.executions.release_all(owner)
            # Executions this engine already drives come back too: skip them.
            candidates = await repos.executions.claimable(
                self.engine_id, now, limit + len(held), ids=self.only
            )
            for execution_id in [i for i in candidates if i not in held][:limit]:
                if await repos.executions.claim(execution_id, self.engine_id, now, until):
                    taken.append(execution_id)
        return [state for state in [await self._load(i) for i in taken] if state is not None]

    async def _load(self, execution_id: str) -> ExecutionState | None:
        async with self.store.read() as repos:
            record = await repos.executions.get(execution_id)
            if record is None:
                return None
            workflow = await self._workflow(repos, record)
            nodes = await repos.nodes.list(execution_id)
        return ExecutionState.build(record, workflow, nodes)

    async def _workflow(self, repos: Repos, record: ExecutionRecord) -> WorkflowSpec:
        key = (record.project, record.domain, record.workflow_key)
        if key not in self._workflows:
            spec = await repos.specs.get_workflow(
                record.project, record.domain, record.workflow_name, record.workflow_version
            )
            if spec is None:
                raise LookupError(
                    f"workflow {record.workflow_key} of {record.id} is not registered"
                )
            self._workflows[key] = spec
        return self._workflows[key]

    async def renew(self, owned: list[str]) -> set[str]:
        """Extend the leases on `owned`; the ids this engine no longer holds."""
        if not owned:
            return set()
        until = self.s.clock.now() + self.s.config.execution_lease
        async with self.store.write() as repos:
            kept = await repos.executions.renew(self.engine_id, owned, until)
        return set(owned) - kept

    async def release(self, execution_id: str) -> None:
        with contextlib.suppress(Exception):
            async with self.store.write() as repos:
                await repos.executions.release(execution_id, self.engine_id)

    async def phases(self, ids: list[str]) -> dict[str, tuple[ExecutionPhase, str]]:
        if not ids:
            return {}
        async with self.store.read() as repos:
            stored = await repos.executions.find(ids=ids, limit=None)
        return {r.id: (r.phase, r.reason) for r in stored}
