"""Gate nodes in the engine (spec/gates.py): a sleep, a wait for a signalled input, a wait
for an approval. A gate runs no plugin and holds no slot, quota or lock: it waits in the
store. When it first steps, the time it started waiting is kept in its plugin state (written
with the node), so a restarted engine goes on waiting for the same end; a signal is an event
of the node, written by whoever answers (service/signals.py), so it is found whichever
engine drives the execution, however often it restarted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sluice.clock import Clock
from sluice.engine.state import ExecutionState, NodeState
from sluice.plugins.core.phase import PhaseInfo
from sluice.spec.gates import APPROVAL_OUTPUT, SIGNALED_EVENT, GateOptions, gate_options
from sluice.store.store import Store

POLL = 1.0
"""Seconds between two looks for a signal."""


class GateNodes:
    def __init__(
        self, store: Store, clock: Clock, wake_at: Callable[[str, str, float], None]
    ) -> None:
        self.store = store
        self.clock = clock
        self.wake_at = wake_at

    async def step(self, ex: ExecutionState, node: NodeState) -> PhaseInfo:
        """RUNNING while the gate waits (its reason says for what); SUCCESS with its outputs
        written; a permanent failure when rejected or timed out."""
        options = gate_options(node.task)
        now = self.clock.now()
        since = self._since(ex, node, now)
        if options.kind == "sleep":
            return self._sleep(ex, node, options, since + options.duration, now)
        signals = await self._signals(ex.id, node.id)
        if signals:
            return self._answered(node, options, signals[0])
        if options.timeout is not None and now >= since + options.timeout:
            message = f"{options.waiting_reason()}: no answer within {options.timeout:g} s"
            return PhaseInfo.permanent_failure("GateTimedOut", message)
        wake = now + POLL
        if options.timeout is not None:
            wake = min(wake, since + options.timeout)
        self.wake_at(ex.id, node.id, wake)
        return PhaseInfo.running(1, options.waiting_reason())

    def _since(self, ex: ExecutionState, node: NodeState, now: float) -> float:
        state = node.record.plugin_state or {}
        if "since" not in state:
            node.record.plugin_state = {"since": now}
            node.record.plugin_state_version = 1
            ex.mark_changed(node)
            return now
        return float(state["since"])

    def _sleep(
        self, ex: ExecutionState, node: NodeState, options: GateOptions, until: float, now: float
    ) -> PhaseInfo:
        if now >= until:
            node.record.outputs = {}
            return PhaseInfo.success(reason=f"slept {options.duration:g} s")
        self.wake_at(ex.id, node.id, until)
        return PhaseInfo.running(1, f"sleeping until {_iso(until)}")

    async def _signals(self, execution_id: str, node_id: str) -> list[object]:
        async with self.store.read() as repos:
            found = await repos.events.of_node(execution_id, node_id, SIGNALED_EVENT)
        return [(e.info or {}).get("value") for e in found]

    def _answered(self, node: NodeState, options: GateOptions, value: object) -> PhaseInfo:
        if options.kind == "signal":
            node.record.outputs = {options.output: value}
            return PhaseInfo.success(reason=f"input {options.signal_id!r} signalled")
        if value is not True:
            return PhaseInfo.permanent_failure(
                "GateRejected", f"approval {options.signal_id!r} was rejected"
            )
        node.record.outputs = {APPROVAL_OUTPUT: (node.record.inputs or {}).get(APPROVAL_OUTPUT)}
        return PhaseInfo.success(reason=f"approval {options.signal_id!r} given")


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
