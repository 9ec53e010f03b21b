"""The Kubernetes plugin contract: a plugin says what object to create for a task and how to
read the task's phase from it; `PluginManager` does the rest (create, watch, abort, clean-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sluice.plugins.core.context import TaskExecutionContext, TaskExecutionMetadata
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.k8s.objects import Manifest

DEFAULT_GENERATED_NAME_MAX_LENGTH = 50


@dataclass(frozen=True)
class K8sPluginProperties:
    disable_delete_resource_on_finalize: bool = False
    """Keep the object once the task is over (e.g. for its logs); it is still deleted when
    the task is aborted or ends while the object runs."""
    generated_name_max_length: int = DEFAULT_GENERATED_NAME_MAX_LENGTH
    """Longest object name; between 8 and 63 (Ray, for one, needs 47)."""
    disable_inject_finalizer: bool = False
    """Create the object without sluice's finalizer."""
    disable_inject_owner_references: bool = False
    """Create the object without the configured owner reference."""


@runtime_checkable
class K8sPlugin(Protocol):
    """Maps a task to one Kubernetes object and the object's state back to a task phase."""

    @property
    def properties(self) -> K8sPluginProperties: ...

    def build_identity_resource(self, metadata: TaskExecutionMetadata) -> Manifest:
        """The object's apiVersion and kind (no name, no spec): what get and delete address."""
        ...

    async def build_resource(self, ctx: TaskExecutionContext) -> Manifest:
        """The full object to create. The manager adds namespace, name, labels, annotations,
        finalizer and owner reference. Raise to fail the task permanently (a bad task spec)."""
        ...

    def get_task_phase(self, ctx: TaskExecutionContext, resource: Manifest) -> PhaseInfo:
        """The task's phase read from the object; fast, no network calls. May write outputs
        through `ctx.outputs` on success."""
        ...


@dataclass(frozen=True)
class AbortBehavior:
    """What aborting does to the object: delete it (the default), or patch or replace it
    (e.g. ask an operator to stop gracefully). With `delete_on_error`, a failed patch or
    update falls back to deletion."""

    delete: bool = True
    patch: Manifest | None = None
    update: Manifest | None = None
    delete_on_error: bool = False

    @classmethod
    def delete_resource(cls) -> AbortBehavior:
        return cls()

    @classmethod
    def patch_resource(cls, patch: Manifest, delete_on_error: bool = False) -> AbortBehavior:
        return cls(delete=False, patch=patch, delete_on_error=delete_on_error)

    @classmethod
    def update_resource(cls, manifest: Manifest, delete_on_error: bool = False) -> AbortBehavior:
        return cls(delete=False, update=manifest, delete_on_error=delete_on_error)


@runtime_checkable
class AbortOverride(Protocol):
    """Implemented by plugins whose objects must not simply be deleted on abort."""

    async def on_abort(self, ctx: TaskExecutionContext, resource: Manifest) -> AbortBehavior:
        """`resource` is the identity object with its namespace and name filled in."""
        ...
