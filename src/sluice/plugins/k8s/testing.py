"""An in-memory Kubernetes API behind the KubeClient seam, for tests of Kubernetes plugins.

It keeps what the plugin machinery relies on: objects by kind, namespace and name; a
resourceVersion bumped on every change and checked as a precondition; finalizers that hold
a deleted object (with a deletionTimestamp) until they are removed; list and watch with
replay from a version, and Gone once history is compacted. Tests play the kubelet with
`set_status` and inject API errors with `fail`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Literal

from sluice.clock import Clock, SystemClock
from sluice.plugins.k8s.errors import (
    KubeAlreadyExistsError,
    KubeApiError,
    KubeConflictError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
)
from sluice.plugins.k8s.objects import (
    DNS1123_LABEL,
    KindRef,
    Manifest,
    ObjectList,
    ObjectRef,
    WatchEvent,
    matches_labels,
    merge_patch,
    meta,
    parse_label_selector,
)

Operation = Literal["create", "get", "delete", "patch", "update", "list", "watch"]


class FakeKubeClient:
    """An in-memory KubeClient. `calls` records (operation, ref) for every call made."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.objects: dict[ObjectRef, Manifest] = {}
        self.calls: list[tuple[Operation, ObjectRef | KindRef]] = []
        self._clock = clock or SystemClock()
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self._history: list[tuple[int, ObjectRef, WatchEvent]] = []
        self._compacted_to = 0
        self._changed = asyncio.Event()
        self._epoch = 0
        self._failures: dict[Operation, deque[KubeApiError]] = {}

    # test controls

    def fail(self, operation: Operation, error: KubeApiError, times: int = 1) -> None:
        """Make the next `times` calls of `operation` raise `error`."""
        self._failures.setdefault(operation, deque()).extend([error] * times)

    def set_status(self, ref: ObjectRef, status: Manifest, **spec: object) -> Manifest:
        """Replace the object's status (and set spec fields), as a controller would."""
        current = self._must_get(ref)
        current["status"] = copy.deepcopy(status)
        current.setdefault("spec", {}).update(spec)
        return self._store(ref, current, "MODIFIED")

    def disconnect_watches(self) -> None:
        """End every open watch stream, as an API server does when a watch times out."""
        self._epoch += 1
        self._wake_watchers()

    def compact(self) -> None:
        """Forget watch history: watches resuming from an older version get Gone."""
        self._compacted_to = self._history[-1][0] if self._history else 0
        self._history.clear()

    def only(self, kind: str) -> list[Manifest]:
        return [copy.deepcopy(obj) for ref, obj in self.objects.items() if ref.kind == kind]

    # the KubeClient seam

    async def create(self, manifest: Manifest) -> Manifest:
        ref = ObjectRef.of(manifest)
        self._enter("create", ref)
        if not DNS1123_LABEL.match(ref.name) or not ref.namespace:
            raise KubeInvalidError(f"{ref}: metadata.name must be a DNS-1123 label", 422, "Invalid")
        if ref in self.objects:
            raise KubeAlreadyExistsError(
                f'{ref.kind} "{ref.name}" already exists', 409, "AlreadyExists"
            )
        stored = copy.deepcopy(manifest)
        metadata = stored.setdefault("metadata", {})
        metadata.update(uid=f"uid-{next(self._uids)}", creationTimestamp=self._timestamp())
        metadata.pop("deletionTimestamp", None)
        return self._store(ref, stored, "ADDED")

    async def get(self, ref: ObjectRef) -> Manifest:
        self._enter("get", ref)
        return copy.deepcopy(self._must_get(ref))

    async def delete(self, ref: ObjectRef) -> None:
        self._enter("delete", ref)
        current = self._must_get(ref)
        if not meta(current).get("finalizers"):
            self._remove(ref)
        elif not meta(current).get("deletionTimestamp"):
            current["metadata"]["deletionTimestamp"] = self._timestamp()
            self._store(ref, current, "MODIFIED")

    async def patch(self, ref: ObjectRef, patch: Manifest) -> Manifest:
        self._enter("patch", ref)
        current = self._must_get(ref)
        self._check_version(ref, current, meta(patch).get("resourceVersion"))
        return self._save_change(ref, merge_patch(current, patch))

    async def update(self, manifest: Manifest) -> Manifest:
        ref = ObjectRef.of(manifest)
        self._enter("update", ref)
        current = self._must_get(ref)
        self._check_version(ref, current, meta(manifest).get("resourceVersion"))
        return self._save_change(ref, copy.deepcopy(manifest))

    async def list_objects(
        self, kind: KindRef, namespace: str, label_selector: str = ""
    ) -> ObjectList:
        self._enter("list", kind)
        selector = parse_label_selector(label_selector)
        items = [
            copy.deepcopy(obj)
            for ref, obj in self.objects.items()
            if ref.kind_ref == kind and ref.namespace == namespace and matches_labels(obj, selector)
        ]
        return ObjectList(items, str(self._last_version()))

    async def watch(
        self, kind: KindRef, namespace: str, label_selector: str = "", resource_version: str = ""
    ) -> AsyncIterator[WatchEvent]:
        self._enter("watch", kind)
        since = int(resource_version or self._last_version())
        if since < self._compacted_to:
            raise KubeGoneError(f"too old resource version: {since}", 410, "Expired")
        selector = parse_label_selector(label_selector)
        epoch = self._epoch
        while epoch == self._epoch:
            changed = self._changed
            for version, ref, event in list(self._history):
                if version > since and ref.kind_ref == kind and ref.namespace == namespace:
                    since = version
                    if matches_labels(event.object, selector):
                        yield WatchEvent(event.type, copy.deepcopy(event.object))
            await changed.wait()

    # internals

    def _enter(self, operation: Operation, target: ObjectRef | KindRef) -> None:
        self.calls.append((operation, target))
        pending = self._failures.get(operation)
        if pending:
            raise pending.popleft()

    def _must_get(self, ref: ObjectRef) -> Manifest:
        if ref not in self.objects:
            raise KubeNotFoundError(f'{ref.kind} "{ref.name}" not found', 404, "NotFound")
        return copy.deepcopy(self.objects[ref])

    def _check_version(self, ref: ObjectRef, current: Manifest, expected: object) -> None:
        if expected and str(expected) != meta(current).get("resourceVersion"):
            raise KubeConflictError(
                f"Operation cannot be fulfilled on {ref}: the object has been modified",
                409,
                "Conflict",
            )

    def _save_change(self, ref: ObjectRef, changed: Manifest) -> Manifest:
        """Store a patched or updated object; a deleted one goes once its finalizers do."""
        if meta(changed).get("deletionTimestamp") and not meta(changed).get("finalizers"):
            self._remove(ref)
            return copy.deepcopy(changed)
        return self._store(ref, changed, "MODIFIED")

    def _store(self, ref: ObjectRef, obj: Manifest, kind: Literal["ADDED", "MODIFIED"]) -> Manifest:
        version = next(self._versions)
        obj.setdefault("metadata", {})["resourceVersion"] = str(version)
        self.objects[ref] = obj
        self._record(version, ref, WatchEvent(kind, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    def _remove(self, ref: ObjectRef) -> None:
        removed = self.objects.pop(ref)
        version = next(self._versions)
        removed["metadata"]["resourceVersion"] = str(version)
        self._record(version, ref, WatchEvent("DELETED", removed))

    def _record(self, version: int, ref: ObjectRef, event: WatchEvent) -> None:
        self._history.append((version, ref, event))
        self._wake_watchers()

    def _wake_watchers(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _last_version(self) -> int:
        return self._history[-1][0] if self._history else self._compacted_to

    def _timestamp(self) -> str:
        return datetime.fromtimestamp(self._clock.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
