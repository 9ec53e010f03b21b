"""Task phases as plugins report them: Flyte's names and values, with PhaseInfo and Transition."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, replace
from typing import Any


class Phase(enum.IntEnum):
    UNDEFINED = 0
    NOT_READY = 1
    WAITING_FOR_RESOURCES = 2
    QUEUED = 3
    INITIALIZING = 4
    RUNNING = 5
    SUCCESS = 6
    RETRYABLE_FAILURE = 7
    PERMANENT_FAILURE = 8
    WAITING_FOR_CACHE = 9
    ABORTED = 10

    def is_terminal(self) -> bool:
        return self.is_failure() or self.is_success() or self.is_aborted()

    def is_failure(self) -> bool:
        return self in (Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)

    def is_success(self) -> bool:
        return self is Phase.SUCCESS

    def is_aborted(self) -> bool:
        return self is Phase.ABORTED

    def is_waiting_for_resources(self) -> bool:
        return self is Phase.WAITING_FOR_RESOURCES


class ErrorKind(enum.StrEnum):
    USER = "USER"
    SYSTEM = "SYSTEM"


@dataclass(frozen=True)
class ExecutionError:
    code: str
    message: str
    kind: ErrorKind = ErrorKind.USER

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "kind": self.kind.value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecutionError:
        return cls(data["code"], data["message"], ErrorKind(data.get("kind", "USER")))


UNKNOWN_ERROR = ExecutionError("Unknown", "Unknown error message")
SYSTEM_ERROR_CODE = "SystemError"


@dataclass(frozen=True)
class TaskLog:
    name: str
    uri: str


@dataclass(frozen=True)
class TaskInfo:
    occurred_at: float = field(default_factory=time.time)
    logs: tuple[TaskLog, ...] = ()
    custom_info: dict[str, Any] = field(default_factory=dict)
    external_id: str = ""


@dataclass(frozen=True)
class PhaseInfo:
    """What a plugin reports for one evaluation: phase, version, reason and error.

    The engine records an event only when (phase, version) differs from the last one recorded;
    bump `version` to publish a change of reason or info within the same phase.
    """

    phase: Phase
    version: int = 0
    reason: str = ""
    info: TaskInfo | None = None
    error: ExecutionError | None = None
    cleanup_on_failure: bool = False
    passed: tuple[PhaseInfo, ...] = ()
    """Phases the task went through since the plugin's last report, oldest first (a job that
    started and ended between two calls): the engine records each one it has not recorded yet,
    at its `info.occurred_at`, before this one, so no phase is missing from the history."""

    def passing(self, *earlier: PhaseInfo) -> PhaseInfo:
        """This report, saying the task went through `earlier` first."""
        return replace(self, passed=(*self.passed, *earlier))

    def with_version(self, version: int) -> PhaseInfo:
        return replace(self, version=version)

    def with_reason(self, reason: str) -> PhaseInfo:
        return replace(self, reason=f"{self.reason}, {reason}" if self.reason else reason)

    # Constructors, one per phase, as Flyte's PhaseInfo* functions.
    @classmethod
    def undefined(cls) -> PhaseInfo:
        return cls(Phase.UNDEFINED)

    @classmethod
    def not_ready(cls, version: int = 0, reason: str = "") -> PhaseInfo:
        return cls(Phase.NOT_READY, version, reason, TaskInfo())

    @classmethod
    def waiting_for_resources(
        cls, version: int = 0, reason: str = "", info: TaskInfo | None = None
    ) -> PhaseInfo:
        return cls(Phase.WAITING_FOR_RESOURCES, version, reason, info or TaskInfo())

    @classmethod
    def queued(cls, version: int = 0, reason: str = "", info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.QUEUED, version, reason, info or TaskInfo())

    @classmethod
    def initializing(
        cls, version: int = 0, reason: str = "", info: TaskInfo | None = None
    ) -> PhaseInfo:
        return cls(Phase.INITIALIZING, version, reason, info or TaskInfo())

    @classmethod
    def running(cls, version: int = 0, reason: str = "", info: TaskInfo | None = None) -> PhaseInfo:
        return cls(Phase.RUNNING, version, reason, info or TaskInfo())

    @classmethod
    def success(cls, info: TaskInfo | None = None, reason: str = "") -> PhaseInfo:
        return cls(Phase.SUCCESS, 0, reason, info or TaskInfo())

    @classmethod
    def waiting_for_cache(
        cls, version: int = 0, reason: str = "", info: TaskInfo | None = None
    ) -> PhaseInfo:
        return cls(Phase.WAITING_FOR_CACHE, version, reason, info or TaskInfo())

    @classmethod
    def aborted(cls, version: int = 0, reason: str = "") -> PhaseInfo:
        return cls(Phase.ABORTED, version, reason, TaskInfo())

    @classmethod
    def retryable_failure(
        cls,
        code: str,
        message: str,
        kind: ErrorKind = ErrorKind.USER,
        info: TaskInfo | None = None,
        cleanup: bool = False,
    ) -> PhaseInfo:
        error = ExecutionError(code, message, kind) if code or message else UNKNOWN_ERROR
        return cls(Phase.RETRYABLE_FAILURE, 0, message, info or TaskInfo(), error, cleanup)

    @classmethod
    def permanent_failure(
        cls,
        code: str,
        message: str,
        kind: ErrorKind = ErrorKind.USER,
        info: TaskInfo | None = None,
        cleanup: bool = False,
    ) -> PhaseInfo:
        error = ExecutionError(code, message, kind) if code or message else UNKNOWN_ERROR
        return cls(Phase.PERMANENT_FAILURE, 0, message, info or TaskInfo(), error, cleanup)

    @classmethod
    def system_retryable_failure(cls, code: str, message: str) -> PhaseInfo:
        return cls.retryable_failure(code, message, ErrorKind.SYSTEM)

    @classmethod
    def system_permanent_failure(cls, code: str, message: str) -> PhaseInfo:
        return cls.permanent_failure(code, message, ErrorKind.SYSTEM)


class TransitionType(enum.IntEnum):
    EPHEMERAL = 0
    BARRIER = 1  # kept for Flyte parity; sluice treats it like EPHEMERAL


@dataclass(frozen=True)
class Transition:
    info: PhaseInfo
    type: TransitionType = TransitionType.EPHEMERAL

    @classmethod
    def to(cls, info: PhaseInfo) -> Transition:
        return cls(info)


UNKNOWN_TRANSITION = Transition(PhaseInfo.undefined())
