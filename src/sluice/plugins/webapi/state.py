"""The state a web-API adapter persists between `handle` calls (as JSON, through the engine).

It is all an engine needs to resume a task after a restart without creating the remote job
again: where the task is in the state machine, the remote job's identity, and the outcome once
terminal (so a repeated `handle` reports it again without calling anything).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from sluice.plugins.core.context import PluginStateReader
from sluice.plugins.core.phase import ErrorKind, ExecutionError, Phase, PhaseInfo, TaskInfo

STATE_VERSION = 1


class WebApiPhase(enum.IntEnum):
    """Flyte's internal web-API phases, same names and values."""

    NOT_STARTED = 0
    ALLOCATION_TOKEN_ACQUIRED = 1
    RESOURCES_CREATED = 2
    SUCCEEDED = 3
    USER_FAILURE = 4
    SYSTEM_FAILURE = 5

    def is_terminal(self) -> bool:
        return self >= WebApiPhase.SUCCEEDED


@dataclass
class State:
    phase: WebApiPhase = WebApiPhase.NOT_STARTED
    phase_version: int = 0
    """Version of the phase this adapter reports while waiting; bumped when the reason changes."""
    reason: str = ""
    namespace: str | None = None
    """The quota namespace a token was asked for; what finalize releases."""
    allocation_requested_at: float | None = None
    """Clock time of the first allocation request, for resource_wait_time."""
    retry_at: float | None = None
    """When a throttled create or do may be tried again (clock time)."""
    resource_meta: dict[str, Any] | None = None
    sync_failure_count: int = 0
    error_message: str = ""
    outcome: dict[str, Any] | None = field(default=None)
    """The terminal PhaseInfo, once there is one."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["phase"] = int(self.phase)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> State:
        if not data:
            return cls()
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        known["phase"] = WebApiPhase(int(known.get("phase", 0)))
        return cls(**known)

    def finish(self, phase: WebApiPhase, info: PhaseInfo) -> PhaseInfo:
        """Record a terminal outcome and return it."""
        self.phase = phase
        self.outcome = outcome_to_json(info)
        return info

    def wait(self, reason: str) -> PhaseInfo:
        """WAITING_FOR_RESOURCES with `reason`, publishing a new version when the reason changes."""
        if reason != self.reason:
            self.phase_version += 1
            self.reason = reason
        return PhaseInfo.waiting_for_resources(self.phase_version, reason)


def outcome_to_json(info: PhaseInfo) -> dict[str, Any]:
    error = info.error.to_json() if info.error else None
    return {
        "phase": int(info.phase),
        "reason": info.reason,
        "error": error,
        "cleanup_on_failure": info.cleanup_on_failure,
    }


def outcome_from_json(data: dict[str, Any]) -> PhaseInfo:
    phase = Phase(int(data["phase"]))
    error = ExecutionError.from_json(data["error"]) if data.get("error") else None
    if phase.is_success():
        return PhaseInfo.success(reason=data.get("reason", ""))
    error = error or ExecutionError("Unknown", data.get("reason", ""), ErrorKind.SYSTEM)
    return PhaseInfo(
        phase, 0, data.get("reason", ""), TaskInfo(), error, bool(data.get("cleanup_on_failure"))
    )


def web_api_phase_of(info: PhaseInfo) -> WebApiPhase:
    """Where the state machine goes after a plugin reported `info` (as Flyte's ToPluginPhase,
    except that "not ready" keeps polling rather than creating the job again)."""
    if info.phase in (Phase.ABORTED, Phase.WAITING_FOR_CACHE):
        return WebApiPhase.SYSTEM_FAILURE
    if info.phase.is_success():
        return WebApiPhase.SUCCEEDED
    if info.phase.is_failure():
        kind = info.error.kind if info.error else ErrorKind.USER
        return WebApiPhase.SYSTEM_FAILURE if kind is ErrorKind.SYSTEM else WebApiPhase.USER_FAILURE
    return WebApiPhase.RESOURCES_CREATED


def settle(state: State, info: PhaseInfo) -> PhaseInfo:
    """`info` as the task's phase: recorded as the outcome when it ends the task. A plugin
    reporting a phase it has no business reporting (aborted, waiting for cache) fails it."""
    phase = web_api_phase_of(info)
    if not phase.is_terminal():
        return info
    if info.phase in (Phase.ABORTED, Phase.WAITING_FOR_CACHE):
        info = PhaseInfo.system_permanent_failure(
            "UnexpectedPhase", f"the plugin reported {info.phase.name}: {info.reason}"
        )
    return state.finish(phase, info)


def load_state(reader: PluginStateReader) -> State | PhaseInfo:
    """The persisted state, or the failure to report when it cannot be read."""
    raw = reader.get()
    if raw is None:
        return State()
    if reader.state_version != STATE_VERSION:
        return PhaseInfo.system_retryable_failure(
            "CorruptedPluginState",
            f"plugin state version {reader.state_version}, expected {STATE_VERSION}",
        )
    try:
        return State.from_json(raw)
    except (TypeError, ValueError, KeyError) as exc:
        return PhaseInfo.system_retryable_failure("CorruptedPluginState", f"bad state: {exc}")
