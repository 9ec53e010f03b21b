"""The task handler: one evaluation of one node, from admission to a terminal phase.

Order of a node's life (DESIGN.md section 6): cache lookup -> reservation -> admission under
the parallelism cap -> quotas and locks -> plugin.handle() until terminal -> finalize.
An event is recorded only when the plugin's (phase, version) is new. Exceptions raised by a
plugin become system errors of that task, never a crash of the engine.

Rules:
- A resumed attempt holds exactly what the stores say it holds. A node whose attempt was in
  flight when this engine loaded it (attempt_started_at set, node not terminal), or whose
  token a renewal found lapsed, is re-verified before any plugin call: its cache reservation
  (still ours -> extended and heartbeat armed) and its tokens and locks (allocated again,
  idempotently). Anything lost stops the attempt: the plugin's abort and finalize are called
  so remote or pool work stops, its tokens are given back, an event (CLAIMS_LOST or
  RESERVATION_LOST) records why, and the node starts its attempt afresh (same attempt
  number: not a user retry) through the cache gate, admission and claims, waiting there
  until it is granted again.
- Plugin calls (handle, abort, finalize) go through the PluginInvoker (engine/invoker.py):
  each is bounded by engine.plugin_call_timeout and, while the task's deadline is ahead, by the
  task's remaining timeout. An overrun call is cancelled (and abandoned if it swallows the
  cancellation); a handle cut by the task's deadline times the task out (a Timeout error, as
  any task timeout), one cut by the cap fails the attempt as a retryable SYSTEM error
  (PluginTimeout). Both are recorded with an event and a reason. A slow handle() goes on in
  the background and the node is stepped again when it returns or overruns.
- Aborting, failing or finishing gives back every token and withdraws every waiter entry the
  node has in the resource manager (ClaimsGate.release).
"""

from __future__ import annotations

import contextlib
import logging

from sluice.engine import lifecycle
from sluice.engine.cache_gate import NO_CACHE
from sluice.engine.claims import NO_CLAIMS
from sluice.engine.holdings import NodeHoldings
from sluice.engine.invoker import PENDING, PluginInvoker
from sluice.engine.services import EngineServices, NodeAdmission, NodeCache, NodeClaims
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import PluginNotFoundError, SluiceError
from sluice.faults import crash_point
from sluice.fencing import FENCED_ERROR
from sluice.locks.names import lock_names
from sluice.plugins.core.phase import ErrorKind, ExecutionError, Phase, PhaseInfo
from sluice.spec.phases import NodePhase
from sluice.store.records import EventRecord

log = logging.getLogger(__name__)
_REVERIFY_RETRY = 1.0
"""Seconds before a node whose stores could not be asked is re-verified again."""


class TaskHandler:
    def __init__(
        self,
        services: EngineServices,
        scheduling: NodeAdmission,
        cache: NodeCache = NO_CACHE,
        claims: NodeClaims = NO_CLAIMS,
    ) -> None:
        self.s = services
        self.scheduling = scheduling
        self.cache = cache
        self.claims = claims
        self.plugins = PluginInvoker(services, scheduling)

    async def step(self, ex: ExecutionState, node: NodeState) -> None:
        if await self._fenced(ex, node):
            return
        rec = node.record
        now = self.s.clock.now()
        if rec.next_attempt_at is not None:
            if now < rec.next_attempt_at:
                self.scheduling.wake_at(ex.id, node.id, rec.next_attempt_at)
                return
            rec.next_attempt_at = None
            ex.mark_changed(node)
        unverified = rec.attempt_started_at is not None and not node.verified
        if unverified and not await self._reverify(ex, node, now):
            return
        if rec.attempt_started_at is None and not node.admitted:
            if await self._held_by_cache(ex, node):
                return
            if not self._admitted_now(ex, node):
                return
        launching = rec.attempt_started_at is None
        if launching:
            if not self.s.launching:  # draining: the next engine starts it
                return
            if await self._held_by_claims(ex, node):
                return
            self._launch(ex, node, now)
        if self._timed_out(node, now):
            await self._time_out(ex, node)
            return
        await self._heartbeat(ex, node)
        if await self._fenced(ex, node):  # checked again right before the plugin acts
            return
        info = await self.plugins.handle(ex, node)
        if launching:
            crash_point("engine.after_launch")
        if info is PENDING:  # stepped again when the call returns or overruns
            return
        if info is None:  # the task's deadline passed while handle() ran
            await self._time_out(ex, node)
            return
        assert isinstance(info, PhaseInfo)
        await self.apply(ex, node, info)

    async def _fenced(self, ex: ExecutionState, node: NodeState) -> bool:
        """True when the engine cannot show its leases alive (sluice/fencing.py): the node
        does nothing now and is stepped again once the leases are re-verified. Also true, for
        good, for an execution the engine dropped (taken over) while this step waited on the
        store: what the step was granted meanwhile, under this ownership's names, is given
        back (the new owner holds its own)."""
        if ex.dropped:
            with contextlib.suppress(SluiceError):
                await self.claims.release(ex, node)
            return True
        if self.s.fence.live():
            return False
        self.s.fence.defer(ex.id, node.id)
        return True

    async def _reverify(self, ex: ExecutionState, node: NodeState, now: float) -> bool:
        """Check an in-flight attempt this engine has not verified against the stores; False
        when the node must not go on in this step (the stores could not be asked). A lost
        reservation or claim stops the attempt, and the node starts afresh in this step."""
        lost: tuple[str, str] | None = None
        try:
            if self._caches(ex, node):
                reason = await self.cache.reverify(ex, node)
                if reason is not None:
                    lost = ("RESERVATION_LOST", reason)
            if lost is None:
                reason = await self.claims.preempted_by(ex, node)
                if reason is not None:
                    lost = ("PREEMPTED", reason)
            if lost is None:
                reason = await self.claims.reverify(ex, node)
                if reason is not None:
                    lost = ("CLAIMS_LOST", reason)
        except SluiceError as exc:
            ex.mark_changed(node)
            self.scheduling.wake_at(ex.id, node.id, now + _REVERIFY_RETRY)
            log.warning("cannot re-verify %s/%s yet: %s", ex.id, node.id, exc)
            return False
        if lost is None:
            lifecycle.verified(node)
            return True
        if lost[0] == "PREEMPTED":
            crash_point("preempt.before_release")
        await self._stop_attempt(ex, node, *lost)
        return True

    async def _stop_attempt(self, ex: ExecutionState, node: NodeState, what: str, why: str) -> None:
        """Stop an attempt that holds less than it must (abort, finalize, give back what it
        holds) and start it afresh: same attempt number, not a retry."""
        rec = node.record
        log.warning("stopping the attempt of %s/%s: %s", ex.id, node.id, why)
        self.plugins.drop(ex, node)
        await self.plugins.call(ex, node, "abort")
        await self.finalize(ex, node)
        reason = f"attempt stopped: {why}; it starts again once granted"
        ex.events.append(
            EventRecord(
                execution_id=ex.id,
                node_id=node.id,
                attempt=rec.attempt,
                phase=what,
                occurred_at=self.s.clock.now(),
                reason=reason,
            )
        )
        NodeHoldings(ex, node).restart(node.lock_names)
        lifecycle.restart_attempt(node, reason)
        ex.mark_changed(node)

    def _caches(self, ex: ExecutionState, node: NodeState) -> bool:
        if not node.task.metadata.cache.enabled:
            return False
        try:
            return not self.plugins.plugin_for(ex, node).properties.disable_node_level_caching
        except PluginNotFoundError:
            return False

    async def _held_by_cache(self, ex: ExecutionState, node: NodeState) -> bool:
        """Run the cache gate; True when the node must not go on now: a hit finished it (no
        slot, no quota, no plugin call), or someone else is computing the same outputs."""
        if not self._caches(ex, node):
            return False
        info = await self.cache.before_launch(ex, node)
        ex.mark_changed(node)
        if info is None:
            return False
        self.record(ex, node, info)
        if info.phase is Phase.SUCCESS:
            if node.queued:
                self.scheduling.release_admission(ex.id, node.id)
                lifecycle.leave_slot(node)
            self._end(ex, node, NodePhase.SUCCEEDED, self.s.clock.now())
        return True

    async def _heartbeat(self, ex: ExecutionState, node: NodeState) -> None:
        due = await self.cache.heartbeat(ex, node)
        if due is not None:
            self.scheduling.wake_at(ex.id, node.id, due)

    def _admitted_now(self, ex: ExecutionState, node: NodeState) -> bool:
        """Ask for a parallelism slot (and the node's locks as far as this engine knows);
        most of the time they are free and the node goes on."""
        if not node.queued:
            if node.lock_names is None:
                node.lock_names = lock_names(node.task, node.record.inputs or {})
                if node.lock_names:  # so `sluice locks ls` can show who waits for what
                    NodeHoldings(ex, node).declare_locks(node.lock_names)
            lifecycle.ask_for_slot(node)
            if self.scheduling.request_admission(
                ex.id, node.id, ex.record.created_at, node.lock_names
            ):
                lifecycle.take_slot(node)
                return True
        reason = self.scheduling.admission_reason(ex.id, node.id, node.lock_names or frozenset())
        self.record(ex, node, PhaseInfo.queued(0, reason))
        return False

    async def _held_by_claims(self, ex: ExecutionState, node: NodeState) -> bool:
        """Claim the node's quotas and locks in one allocation; True when refused: the node
        gives its slot back and waits (WAITING_FOR_RESOURCES, with the manager's reason)."""
        info, busy_lock = await self.claims.acquire(ex, node)
        if info is None:
            return False
        self.record(ex, node, info)
        if info.phase.is_terminal():
            await self._finish_attempt(ex, node, info)
        elif busy_lock is not None:
            lifecycle.wait_for_lock(node)
            self.scheduling.reject(ex.id, node.id, [busy_lock])
        else:
            lifecycle.leave_slot(node)
            self.scheduling.release_admission(ex.id, node.id)
        return True

    def _launch(self, ex: ExecutionState, node: NodeState, now: float) -> None:
        lifecycle.launch(node, now)
        ex.mark_changed(node)
        if node.heartbeat_at is not None:
            self.scheduling.wake_at(ex.id, node.id, node.heartbeat_at)
        timeout = node.task.metadata.timeout
        if timeout is not None:
            self.scheduling.wake_at(ex.id, node.id, now + timeout)

    def _timed_out(self, node: NodeState, now: float) -> bool:
        deadline = self.plugins.deadline(node)
        return deadline is not None and now >= deadline

    async def _time_out(self, ex: ExecutionState, node: NodeState) -> None:
        timeout = node.task.metadata.timeout
        self.plugins.drop(ex, node)
        await self.plugins.call(ex, node, "abort")
        info = PhaseInfo.retryable_failure("Timeout", f"task timed out after {timeout}s")
        await self.apply(ex, node, info)

    async def apply(self, ex: ExecutionState, node: NodeState, info: PhaseInfo) -> None:
        """Record what the plugin reported; on a terminal phase, finish the attempt."""
        if info.phase is Phase.UNDEFINED:
            return
        if info.error is not None and info.error.code == FENCED_ERROR:
            # Its body was ended by fencing, not by its own failure: start the attempt again
            # (not a retry), once the engine holds what it needs.
            await self._stop_attempt(ex, node, "FENCED", info.error.message.splitlines()[-1])
            return
        if info.version > self.s.config.max_plugin_phase_versions:
            info = PhaseInfo.permanent_failure(
                "TooManyPluginPhaseVersions",
                f"phase version {info.version} passed {self.s.config.max_plugin_phase_versions}",
                ErrorKind.SYSTEM,
            )
        for earlier in info.passed:  # phases passed through between two calls, at their time
            self.record(ex, node, earlier, earlier.info.occurred_at if earlier.info else None)
        self.record(ex, node, info)
        if info.phase is Phase.SUCCESS:
            crash_point("engine.after_success")
        if info.phase.is_terminal():
            await self._finish_attempt(ex, node, info)

    def record(
        self, ex: ExecutionState, node: NodeState, info: PhaseInfo, at: float | None = None
    ) -> None:
        """Update the node's task phase; an event only for a new (phase, version), at `at`
        (default now), never before the node's last change: a phase the plugin passed through
        may have begun before the engine recorded the one before it."""
        rec = node.record
        if (info.phase, info.version) != (rec.task_phase, rec.phase_version):
            ex.events.append(
                EventRecord(
                    execution_id=ex.id,
                    node_id=node.id,
                    attempt=rec.attempt,
                    phase=info.phase.name,
                    phase_version=info.version,
                    reason=info.reason,
                    occurred_at=self.s.clock.now() if at is None else max(at, rec.updated_at),
                    info=info.error.to_json() if info.error else None,
                )
            )
            rec.task_phase, rec.phase_version = int(info.phase), info.version
            ex.mark_changed(node)
            log.debug(
                "%s/%s attempt %d: %s %s",
                ex.id,
                node.id,
                rec.attempt + 1,
                info.phase.name,
                info.reason,
            )
            if self.s.counters is not None:
                self.s.counters.transition(info.phase.name)
        if info.reason != rec.reason:
            rec.reason = info.reason
            ex.mark_changed(node)
        rec.updated_at = self.s.clock.now()

    async def _finish_attempt(self, ex: ExecutionState, node: NodeState, info: PhaseInfo) -> None:
        if info.phase.is_failure() and info.cleanup_on_failure:
            # The plugin asks for its remote work to be stopped.
            await self.plugins.call(ex, node, "abort")
        await self.finalize(ex, node)
        if self._caches(ex, node):
            await self.cache.after_attempt(ex, node, info.phase is Phase.SUCCESS)
        rec = node.record
        now = self.s.clock.now()
        if info.phase is Phase.SUCCESS:
            self._end(ex, node, NodePhase.SUCCEEDED, now)
        elif info.phase is Phase.ABORTED:
            self._end(ex, node, NodePhase.ABORTED, now)
        elif info.phase is Phase.RETRYABLE_FAILURE and self._may_retry(node, info):
            self._schedule_retry(ex, node, info, now)
        else:
            rec.error = (info.error or ExecutionError("Unknown", info.reason)).to_json()
            self._end(ex, node, NodePhase.FAILED, now)

    def _may_retry(self, node: NodeState, info: PhaseInfo) -> bool:
        rec = node.record
        if info.error is not None and info.error.kind is ErrorKind.SYSTEM:
            return rec.system_failures < self.s.config.max_system_failures
        return rec.attempt - rec.system_failures < node.task.metadata.retries

    def _schedule_retry(
        self, ex: ExecutionState, node: NodeState, info: PhaseInfo, now: float
    ) -> None:
        rec = node.record
        if info.error is not None and info.error.kind is ErrorKind.SYSTEM:
            rec.system_failures += 1
        delay = min(self.s.config.backoff_max, self.s.config.backoff_base * 2**rec.attempt)
        first_line = (info.error.message if info.error else info.reason).strip().splitlines()
        rec.error = info.error.to_json() if info.error else None
        reason = f"retrying in {delay:.1f}s after: {first_line[-1] if first_line else 'failure'}"
        lifecycle.schedule_retry(node, now + delay, reason)
        ex.mark_changed(node)
        self.scheduling.wake_at(ex.id, node.id, now + delay)

    def _end(self, ex: ExecutionState, node: NodeState, phase: NodePhase, now: float) -> None:
        lifecycle.end(node, phase, now)
        ex.mark_changed(node)

    async def finalize(self, ex: ExecutionState, node: NodeState) -> None:
        """Call the plugin's finalize (always, once the attempt is over) and free the slot."""
        self.plugins.drop(ex, node)
        if self._started(node):
            await self.plugins.call(ex, node, "finalize")
        self.plugins.forget_context(node)  # the attempt is over: a later call makes its own
        if self.s.logs is not None:  # the attempt's log is flushed and closed in the background
            self.s.logs.end(ex.id, node.id, node.record.attempt)
        if lifecycle.leave_slot(node):
            self.scheduling.release_admission(ex.id, node.id)
        await self.claims.release(ex, node)

    @staticmethod
    def _started(node: NodeState) -> bool:
        """The plugin may have work to stop: the node holds a slot, wrote plugin state, or
        its attempt was launched (possibly by an engine before this one)."""
        rec = node.record
        return node.admitted or rec.plugin_state is not None or rec.attempt_started_at is not None

    async def abort(self, ex: ExecutionState, node: NodeState, reason: str) -> None:
        """Stop a node: abort and finalize a started task, skip one that never started."""
        rec = node.record
        if rec.phase is NodePhase.NOT_STARTED:
            self.record(ex, node, PhaseInfo(Phase.ABORTED, 0, f"skipped: {reason}"))
            self._end(ex, node, NodePhase.SKIPPED, self.s.clock.now())
            return
        if rec.phase is not NodePhase.RUNNING:
            return
        self.plugins.drop(ex, node)
        if self._started(node):
            await self.plugins.call(ex, node, "abort")
        await self.finalize(ex, node)
        await self.cache.release(ex, node)
        rec.next_attempt_at = None
        self.record(ex, node, PhaseInfo.aborted(0, reason))
        self._end(ex, node, NodePhase.ABORTED, self.s.clock.now())
