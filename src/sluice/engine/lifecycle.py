"""A node's life in the engine that drives it: one state machine, its transitions named here
and made nowhere else (the handler, the admission side, the cache gate and the engine call
them). The store's phases (NodePhase, the plugin's Phase) are the durable part; what follows
is the engine's memory of a node, rebuilt (as IDLE, UNVERIFIED, DISARMED) when an engine loads
an execution.

    the parallelism slot                      the in-flight attempt
    IDLE     --ask_for_slot-->  QUEUED        UNVERIFIED --launch / verified--> VERIFIED
    QUEUED   --take_slot----->  ADMITTED      VERIFIED   --suspect-----------> UNVERIFIED
    ADMITTED --wait_for_lock->  QUEUED        (a renewal found a token lapsed, or the
    any      --leave_slot---->  IDLE           attempt was stopped or retried)

    the cache reservation's heartbeat         waiting for someone else's reservation
    DISARMED --arm_heartbeat--> ARMED         start_waiting(now) ... stop_waiting() -> waited
    ARMED    --disarm_heartbeat--> DISARMED

The attempt itself: `launch` starts it; `restart_attempt` (it held less than it must) and
`schedule_retry` (it failed and may run again) reset it; `end` makes the node terminal.
"""

from __future__ import annotations

from sluice.engine.state import NodeState
from sluice.plugins.core.phase import Phase
from sluice.spec.phases import NodePhase


# The parallelism slot. QUEUED and ADMITTED are never both true.
def ask_for_slot(node: NodeState) -> None:
    node.queued = True


def take_slot(node: NodeState) -> None:
    node.admitted, node.queued = True, False


def wait_for_lock(node: NodeState) -> None:
    """Admitted, then refused a lock held elsewhere: back in the queue, the slot given up."""
    node.admitted, node.queued = False, True


def leave_slot(node: NodeState) -> bool:
    """Out of the queue and off the slot; whether the admission side must be told."""
    was_in = node.admitted or node.queued
    node.admitted = node.queued = False
    return was_in


# The in-flight attempt's standing.
def verified(node: NodeState) -> None:
    """It holds what the stores say it holds: it may call its plugin."""
    node.verified = True


def suspect(node: NodeState) -> None:
    """It may hold less than its record says: re-verify before any plugin call."""
    node.verified = False


# The cache reservation's heartbeat.
def arm_heartbeat(node: NodeState, at: float) -> float:
    node.heartbeat_at = at
    return at


def disarm_heartbeat(node: NodeState) -> None:
    node.heartbeat_at = None


# Waiting for someone else's reservation.
def start_waiting(node: NodeState, now: float) -> None:
    """Kept from the first refusal: a waiter asking again still waits since then."""
    node.waiting_since = node.waiting_since or now


def stop_waiting(node: NodeState, now: float) -> float | None:
    """No longer waiting; how long it waited, if it did."""
    since, node.waiting_since = node.waiting_since, None
    return None if since is None else now - since


# The attempt.
def launch(node: NodeState, now: float) -> None:
    """The attempt starts here, on what it was just granted."""
    node.record.attempt_started_at = now
    verified(node)


def restart_attempt(node: NodeState, reason: str) -> None:
    """Back to before the launch, same attempt number (not a user retry): it waits for the
    cache, a slot and its claims again."""
    _reset_attempt(node)
    node.record.reason = reason
    disarm_heartbeat(node)
    suspect(node)


def schedule_retry(node: NodeState, at: float, reason: str) -> None:
    """A new attempt, started no earlier than `at`."""
    rec = node.record
    rec.attempt += 1
    _reset_attempt(node)
    rec.next_attempt_at = at
    rec.reason = reason


def _reset_attempt(node: NodeState) -> None:
    rec = node.record
    rec.plugin_state, rec.plugin_state_version = None, 0
    rec.task_phase, rec.phase_version = int(Phase.UNDEFINED), 0
    rec.attempt_started_at, rec.outputs = None, None


def end(node: NodeState, phase: NodePhase, now: float) -> None:
    node.record.phase = phase
    node.record.ended_at = now
