"""A watch-backed read cache of Kubernetes objects (an informer) and the refresh callbacks it
fires, so a task is re-evaluated as soon as its object changes instead of at the next resync.

Reads stay correct without the watch: an object the cache has not seen (not synced yet, just
created, watch broken) is read from the API server directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock
from sluice.plugins.k8s.client import KubeClient
from sluice.plugins.k8s.errors import KubeGoneError
from sluice.plugins.k8s.objects import KindRef, Manifest, ObjectRef, WatchEvent, meta

logger = logging.getLogger(__name__)


class RefreshRegistry:
    """Callbacks by object: `notify(ref)` calls the one registered for that object, if any."""

    def __init__(self) -> None:
        self._callbacks: dict[ObjectRef, Callable[[], None]] = {}

    def register(self, ref: ObjectRef, callback: Callable[[], None]) -> None:
        self._callbacks[ref] = callback

    def unregister(self, ref: ObjectRef) -> None:
        self._callbacks.pop(ref, None)

    def notify(self, ref: ObjectRef) -> None:
        callback = self._callbacks.get(ref)
        if callback is None:
            return
        try:
            callback()
        except Exception:  # a broken callback must not stop the watch of every other task
            logger.exception("refresh callback for %s failed", ref)

    def __len__(self) -> int:
        return len(self._callbacks)


class _Informer:
    """List then watch one kind in one namespace; keep the objects by name."""

    def __init__(
        self,
        client: KubeClient,
        kind: KindRef,
        namespace: str,
        selector: str,
        on_change: Callable[[ObjectRef], None],
        clock: Clock,
        retry_delay: float,
    ) -> None:
        self.kind, self.namespace, self.selector = kind, namespace, selector
        self.objects: dict[str, Manifest] = {}
        self.synced = False
        self._client, self._on_change = client, on_change
        self._clock, self._retry_delay = clock, retry_delay

    async def run(self) -> None:
        version = ""
        while True:
            try:
                version = version or await self._relist()
                async for event in self._client.watch(
                    self.kind, self.namespace, self.selector, version
                ):
                    version = self._apply(event) or version
                await asyncio.sleep(0)  # the server ended the stream: watch again from here
            except KubeGoneError:
                version = ""
            except Exception as exc:  # reads fall back to the API server meanwhile
                reraise_cancellation()
                logger.warning(
                    "watch of %s in %s failed, retrying: %r", self.kind, self.namespace, exc
                )
                self.synced, version = False, ""
                await self._clock.sleep(self._retry_delay)

    async def _relist(self) -> str:
        listing = await self._client.list_objects(self.kind, self.namespace, self.selector)
        before = self.objects
        self.objects = {meta(item).get("name", ""): item for item in listing.items}
        self.synced = True
        for name in before.keys() | self.objects.keys():
            old, new = before.get(name), self.objects.get(name)
            if old is None or new is None or _version(old) != _version(new):
                self._on_change(self._ref(name))
        return listing.resource_version

    def _apply(self, event: WatchEvent) -> str:
        name = meta(event.object).get("name", "")
        if event.type == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = event.object
        self._on_change(self._ref(name))
        return _version(event.object)

    def _ref(self, name: str) -> ObjectRef:
        return ObjectRef(self.kind.api_version, self.kind.kind, self.namespace, name)


def _version(manifest: Manifest) -> str:
    return str(meta(manifest).get("resourceVersion", ""))


class WatchCache:
    """Serves `get` from one informer per (kind, namespace), started on first use; calls
    `on_change(ref)` for every object an informer sees change. `close` stops the informers."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        on_change: Callable[[ObjectRef], None],
        label_selector: str = "",
        retry_delay: float = 1.0,
    ) -> None:
        self._client, self._clock, self._on_change = client, clock, on_change
        self._selector, self._retry_delay = label_selector, retry_delay
        self._informers: dict[tuple[KindRef, str], _Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def watch(self, kind: KindRef, namespace: str) -> None:
        """Make sure the objects of `kind` in `namespace` are being watched."""
        if (kind, namespace) in self._informers:
            return
        informer = _Informer(
            self._client,
            kind,
            namespace,
            self._selector,
            self._on_change,
            self._clock,
            self._retry_delay,
        )
        self._informers[(kind, namespace)] = informer
        self._tasks.append(asyncio.get_running_loop().create_task(informer.run()))

    def is_synced(self, kind: KindRef, namespace: str) -> bool:
        informer = self._informers.get((kind, namespace))
        return informer is not None and informer.synced

    async def get(self, ref: ObjectRef) -> Manifest:
        """The object from the cache when the cache has it, else from the API server."""
        self.watch(ref.kind_ref, ref.namespace)
        informer = self._informers[(ref.kind_ref, ref.namespace)]
        cached = informer.objects.get(ref.name) if informer.synced else None
        if cached is not None:
            return copy.deepcopy(cached)
        return await self._client.get(ref)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._informers.clear()
