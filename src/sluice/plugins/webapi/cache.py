"""The auto-refresh cache: polls every live remote resource in the background.

One item per task attempt (keyed by its generated name), least recently used dropped beyond
`size` (a dropped item is seeded again from the task's persisted state on its next `handle`).
Every `resync_interval` each live item not already queued is queued once; `workers` pollers
call `get` under the read limiter. A change of the resource asks the engine to re-evaluate the
task at once (`refresh`). More than `max_system_failures` consecutive failed polls, or a
vanished resource, end the item with a failure that the task's next `handle` reports.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock
from sluice.plugins.core.context import SecretManager
from sluice.plugins.core.phase import ErrorKind, PhaseInfo
from sluice.plugins.webapi.calls import RemoteCalls
from sluice.plugins.webapi.config import CachingConfig
from sluice.plugins.webapi.interfaces import (
    AsyncPlugin,
    GetContext,
    Resource,
    ResourceMeta,
    ResourceVanishedError,
    RetryLater,
)

log = logging.getLogger(__name__)


@dataclass
class CacheItem:
    key: str
    resource_meta: ResourceMeta
    secrets: SecretManager
    refresh: Callable[[], None]
    """The latest task context's refresh callback; kept so background polls can wake it."""
    resource: Resource | None = None
    synced: bool = False
    sync_failure_count: int = 0
    error_message: str = ""
    failure: PhaseInfo | None = None
    """Set when polling gave up; the item is then no longer polled."""


class ResourceCache:
    def __init__(
        self, plugin: AsyncPlugin, calls: RemoteCalls, config: CachingConfig, clock: Clock
    ) -> None:
        self._plugin = plugin
        self._calls = calls
        self._config = config
        self._clock = clock
        self._items: OrderedDict[str, CacheItem] = OrderedDict()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def polling(self) -> int:
        """Items queued for a poll or being polled right now."""
        return len(self._queued)

    def get_or_create(self, item: CacheItem) -> CacheItem:
        """The cached item under `item.key`, or `item` inserted; its callbacks are updated."""
        self._start()
        found = self._items.get(item.key)
        if found is None:
            self._items[item.key] = found = item
            while len(self._items) > self._config.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(item.key)
            found.refresh, found.secrets = item.refresh, item.secrets
        return found

    def drop(self, key: str) -> None:
        """Stop tracking `key` (terminal, aborted or finalized); idempotent."""
        self._items.pop(key, None)

    def enqueue_all(self) -> None:
        """Queue every live item not already queued or being polled: one resync pass."""
        for key, item in self._items.items():
            if item.failure is None and key not in self._queued:
                self._queued.add(key)
                self._queue.put_nowait(key)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _start(self) -> None:
        # Started on first use, inside the engine's event loop, not at plugin load.
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._resync_loop()))
        self._tasks.extend(loop.create_task(self._worker()) for _ in range(self._config.workers))

    async def _resync_loop(self) -> None:
        while True:
            await self._clock.sleep(self._config.resync_interval)
            self.enqueue_all()

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            try:
                await self._sync(key)
            except Exception:  # a bug in a plugin's get must not stop the poller
                reraise_cancellation()
                log.exception("web-API cache: polling %s failed unexpectedly", key)
            finally:
                self._queued.discard(key)

    async def _sync(self, key: str) -> None:
        item = self._items.get(key)
        if item is None or item.failure is not None:
            return
        try:
            resource = await self._calls.read(
                lambda: self._plugin.get(GetContext(item.resource_meta, item.secrets))
            )
        except RetryLater:
            return  # not a failure: the read limiter is paused and the next pass polls again
        except ResourceVanishedError as exc:
            self._fail(item, "ResourceDeletedExternally", f"job vanished: {exc}", cleanup=False)
        except Exception as exc:
            self._failed_poll(item, exc)
        else:
            self._update(item, resource)

    def _update(self, item: CacheItem, resource: Resource) -> None:
        changed = not item.synced or resource != item.resource
        item.resource, item.synced = resource, True
        item.sync_failure_count, item.error_message = 0, ""
        if changed:
            self._wake(item)

    def _failed_poll(self, item: CacheItem, exc: Exception) -> None:
        item.sync_failure_count += 1
        item.error_message = f"{type(exc).__name__}: {exc}"
        if item.sync_failure_count > self._config.max_system_failures:
            message = (
                f"{item.sync_failure_count} consecutive polls failed, last: {item.error_message}"
            )
            # The job may still run remotely: ask the engine to clean up (abort -> delete).
            self._fail(item, "CacheFailed", message, cleanup=True)

    def _fail(self, item: CacheItem, code: str, message: str, cleanup: bool) -> None:
        item.failure = PhaseInfo.retryable_failure(code, message, ErrorKind.SYSTEM, cleanup=cleanup)
        self._wake(item)

    def _wake(self, item: CacheItem) -> None:
        # A dropped item's task is finished or aborted; waking it would be noise.
        if self._items.get(item.key) is item:
            item.refresh()
