"""Which engine drives which execution: claims, leases, and takeover of dead owners.

An execution whose state cannot be loaded (its workflow is not registered, a record does not
parse) is released and retried with back-off; after `max_reconcile_failures` loads in a row
it is FAILED in the store with the last error (and an event), instead of being claimed and
dropped for ever. Store outages do not count (the store's health reports them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Collection

from sluice.cancellation import reraise_cancellation
from sluice.clock import store_now
from sluice.engine.compound import restore as restore_children
from sluice.engine.services import EngineServices
from sluice.engine.state import ExecutionState
from sluice.ids import instance_pid
from sluice.spec.models import WorkflowSpec
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import EventRecord, ExecutionRecord
from sluice.store.store import Repos, Store

log = logging.getLogger(__name__)
_ACTIVE = [p for p in ExecutionPhase if not p.is_terminal]


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
        self,
        services: EngineServices,
        store: Store,
        *,
        only: Collection[str] | None,
        workflows: dict[tuple[str, str, str], WorkflowSpec] | None = None,
    ) -> None:
        self.s = services
        self.store = store
        self.only = only
        self._workflows = {} if workflows is None else workflows
        """Specs by (project, domain, workflow key): immutable once stored, read once."""
        self._load_failures: dict[str, tuple[int, float]] = {}
        """Execution id -> (consecutive failed loads, no new try before)."""

    @property
    def engine_id(self) -> str:
        return self.s.engine_id

    async def claim(self, held: Collection[str], limit: int) -> list[ExecutionState]:
        """Take up to `limit` executions nobody alive holds, highest priority then oldest
        first; their loaded states.

        Nobody alive: no owner, a lease lapsed on the STORE's clock (never this engine's), or
        an owner that was a process on this host that no longer exists (its executions are
        released at once). An owner whose lease is live and that is not provably dead
        (another host, or a process that exists) is never taken from: a live engine on this
        host is never treated as dead. Each claim starts a new ownership epoch; a state whose
        stored owner or epoch is not this claim's is not driven.
        """
        now, local = store_now(self.s.clock), self.s.clock.now()
        lease = self.s.config.execution_lease
        taken: dict[str, int] = {}
        async with self.store.write() as repos:
            for owner in await repos.executions.other_owners(self.engine_id, now):
                if dead_local_owner(owner):
                    await repos.executions.release_all(owner)
            # Executions this engine already drives come back too: skip them.
            candidates = await repos.executions.claimable(
                self.engine_id, now, limit + len(held), ids=self.only
            )
            wanted = [i for i in candidates if i not in held and not self._backing_off(i, local)]
            for execution_id in wanted[:limit]:
                epoch = await repos.executions.claim(execution_id, self.engine_id, now, lease)
                if epoch is not None:
                    taken[execution_id] = epoch
        loaded = [await self._load_or_fail(i) for i in taken]
        return [
            state
            for state in loaded
            if state is not None
            and (state.record.owner, state.record.owner_epoch) == (self.engine_id, taken[state.id])
        ]

    def _backing_off(self, execution_id: str, now: float) -> bool:
        failed = self._load_failures.get(execution_id)
        return failed is not None and now < failed[1]

    async def _load_or_fail(self, execution_id: str) -> ExecutionState | None:
        try:
            state = await self._load(execution_id)
        except Exception as exc:
            reraise_cancellation()
            if self.store.db.health.expected(exc):
                return None  # not driven: its lease lapses and it is claimed again
            await self._load_failed(execution_id, exc)
            return None
        self._load_failures.pop(execution_id, None)
        return state

    async def _load_failed(self, execution_id: str, exc: Exception) -> None:
        count = self._load_failures.get(execution_id, (0, 0.0))[0] + 1
        config = self.s.config
        delay = max(0.01, min(config.backoff_max, config.backoff_base * 2 ** (count - 1)))
        self._load_failures[execution_id] = (count, self.s.clock.now() + delay)
        limit = config.max_reconcile_failures
        log.warning(
            "loading %s failed (%d/%d): %s", execution_id, count, limit, exc, exc_info=count == 1
        )
        async with self.store.write() as repos:
            if count >= limit:
                await self._fail_unloadable(repos, execution_id, f"{exc}")
                self._load_failures.pop(execution_id, None)
            await repos.executions.release(execution_id, self.engine_id)

    async def _fail_unloadable(self, repos: Repos, execution_id: str, error: str) -> None:
        now = self.s.clock.now()
        message = f"loading the execution failed {self.s.config.max_reconcile_failures} times"
        message += f" in a row: {error}"
        if await repos.executions.compare_and_set_phase(
            execution_id,
            _ACTIVE,
            ExecutionPhase.FAILED,
            now,
            reason=message,
            error={"code": "ReconcileFailed", "message": message, "kind": "SYSTEM"},
        ):
            event = EventRecord(execution_id, ExecutionPhase.FAILED.value, now, reason=message)
            await repos.events.append([event])

    async def _load(self, execution_id: str) -> ExecutionState | None:
        async with self.store.read() as repos:
            record = await repos.executions.get(execution_id)
            if record is None:
                return None
            workflow = await self._workflow(repos, record)
            nodes = await repos.nodes.list(execution_id)
        state = ExecutionState.build(record, workflow, nodes)
        restore_children(state, nodes)
        return state

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
        """Extend the leases on `owned` by a lease of the store's clock; the ids this engine
        no longer holds."""
        if not owned:
            return set()
        now, lease = store_now(self.s.clock), self.s.config.execution_lease
        async with self.store.write() as repos:
            kept = await repos.executions.renew(self.engine_id, owned, now, lease)
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
