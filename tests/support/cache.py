"""Cache test doubles shared by the catalog's and the cache gate's tests."""

from __future__ import annotations

import asyncio

from sluice.cache import CacheEntry
from sluice.cache.backends.memory import MemoryEntries


class HeldEntries(MemoryEntries):
    """Entry reads that wait for `go` before reading; counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.go = asyncio.Event()

    async def get(self, key: str) -> CacheEntry | None:
        self.reads += 1
        await self.go.wait()
        return await super().get(key)
