"""What PluginManager persists per task attempt (through the plugin state writer)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sluice.plugins.core.phase import Phase, PhaseInfo
from sluice.plugins.k8s.objects import ObjectRef

STATE_VERSION = 1


@dataclass(frozen=True)
class ManagerState:
    """NotStarted (`started` False) until the object exists, then Started; with the last
    phase, version and reason reported, and the object created."""

    started: bool = False
    phase: Phase = Phase.UNDEFINED
    version: int = 0
    reason: str = ""
    cleanup_on_failure: bool = False
    ref: ObjectRef | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "started": self.started,
            "phase": int(self.phase),
            "version": self.version,
            "reason": self.reason,
            "cleanup_on_failure": self.cleanup_on_failure,
        }
        if self.ref is not None:
            data["ref"] = [self.ref.api_version, self.ref.kind, self.ref.namespace, self.ref.name]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ManagerState:
        ref = data.get("ref")
        return cls(
            started=bool(data["started"]),
            phase=Phase(data["phase"]),
            version=int(data["version"]),
            reason=str(data["reason"]),
            cleanup_on_failure=bool(data.get("cleanup_on_failure", False)),
            ref=ObjectRef(*ref) if ref else None,
        )

    def publish(self, info: PhaseInfo) -> PhaseInfo:
        """`info` with a version the engine will record when only its reason changed: within
        one phase the version never goes back, and grows when the reason changes."""
        if info.phase != self.phase or info.phase.is_terminal():
            return info
        version = max(info.version, self.version)
        if info.reason != self.reason and info.version <= self.version:
            version = self.version + 1
        return info.with_version(version)

    def after(self, info: PhaseInfo) -> ManagerState:
        return replace(
            self,
            phase=info.phase,
            version=info.version,
            reason=info.reason,
            cleanup_on_failure=info.cleanup_on_failure,
        )
