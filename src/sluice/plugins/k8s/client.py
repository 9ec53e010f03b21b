"""The KubeClient seam: the handful of Kubernetes API calls the plugin machinery needs.

Implementations: `kube_asyncio.KubernetesAsyncioClient` (a real cluster) and
`testing.FakeKubeClient` (in memory). Objects go in and come out as plain JSON dicts, and
every failure is one of the errors in `sluice.plugins.k8s.errors`, translated by the
implementation: callers never see a driver's exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from sluice.plugins.k8s.objects import KindRef, Manifest, ObjectList, ObjectRef, WatchEvent


class KubeClient(Protocol):
    async def create(self, manifest: Manifest) -> Manifest:
        """Create the object (namespace and name from its metadata); return it as stored.
        Raises KubeAlreadyExistsError if the name is taken, KubeQuotaExceededError,
        KubeForbiddenError or KubeInvalidError if the API server refuses it."""
        ...

    async def get(self, ref: ObjectRef) -> Manifest:
        """The object as the API server has it now; KubeNotFoundError if it does not exist."""
        ...

    async def delete(self, ref: ObjectRef) -> None:
        """Ask for deletion: with finalizers the object stays, with a deletionTimestamp, until
        they are removed. Raises KubeNotFoundError if it does not exist."""
        ...

    async def patch(self, ref: ObjectRef, patch: Manifest) -> Manifest:
        """Apply a JSON merge patch (RFC 7386); return the object. A `metadata.resourceVersion`
        in the patch is a precondition: KubeConflictError if the object has moved on."""
        ...

    async def update(self, manifest: Manifest) -> Manifest:
        """Replace the object; KubeConflictError if its `metadata.resourceVersion` is stale."""
        ...

    async def list_objects(
        self, kind: KindRef, namespace: str, label_selector: str = ""
    ) -> ObjectList:
        """Objects of a kind in a namespace matching an equality selector ("a=b,c=d")."""
        ...

    def watch(
        self, kind: KindRef, namespace: str, label_selector: str = "", resource_version: str = ""
    ) -> AsyncIterator[WatchEvent]:
        """Changes after `resource_version` (from `list_objects`) until the server ends the
        stream. Raises KubeGoneError when that version is too old: list again."""
        ...


class LazyKubeClient:
    """A KubeClient made on first use, so a plugin loads on a machine with no cluster and
    only the tasks that need one fail (with the connection error) when they run."""

    def __init__(self, connect: Callable[[], Awaitable[KubeClient]]) -> None:
        self._connect = connect
        self._client: KubeClient | None = None
        self._lock = asyncio.Lock()

    async def client(self) -> KubeClient:
        async with self._lock:
            if self._client is None:
                self._client = await self._connect()
            return self._client

    async def create(self, manifest: Manifest) -> Manifest:
        return await (await self.client()).create(manifest)

    async def get(self, ref: ObjectRef) -> Manifest:
        return await (await self.client()).get(ref)

    async def delete(self, ref: ObjectRef) -> None:
        await (await self.client()).delete(ref)

    async def patch(self, ref: ObjectRef, patch: Manifest) -> Manifest:
        return await (await self.client()).patch(ref, patch)

    async def update(self, manifest: Manifest) -> Manifest:
        return await (await self.client()).update(manifest)

    async def list_objects(
        self, kind: KindRef, namespace: str, label_selector: str = ""
    ) -> ObjectList:
        return await (await self.client()).list_objects(kind, namespace, label_selector)

    async def watch(
        self, kind: KindRef, namespace: str, label_selector: str = "", resource_version: str = ""
    ) -> AsyncIterator[WatchEvent]:
        client = await self.client()
        async for event in client.watch(kind, namespace, label_selector, resource_version):
            yield event

    async def close(self) -> None:
        close = getattr(self._client, "close", None)
        if close is not None:
            await close()
