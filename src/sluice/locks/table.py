"""Who holds which lock, what each lock's capacity is, and which locks are busy elsewhere."""

from __future__ import annotations

from collections.abc import Callable

from sluice.errors import InvalidArgumentError


class LockTable:
    """Lock accounting for one scheduler; no policy, no waiting tasks.

    A lock is *available* when it has a free unit (holders < capacity) and no other engine is
    known to hold it. `acquire`, `release` and the busy-elsewhere marks return True exactly when
    they flip a lock's availability, so the caller can update its waiters in O(waiters).
    """

    def __init__(self, capacity: Callable[[str], int]) -> None:
        self._capacity_of = capacity
        self._capacity: dict[str, int] = {}
        self._holders: dict[str, set[str]] = {}
        self._unavailable: set[str] = set()
        """Locks with no free unit or busy elsewhere: the hot check is one set lookup."""
        self._busy_elsewhere: set[str] = set()

    def capacity(self, name: str) -> int:
        """Units of `name`, asked of the capacity function once while the lock is in use."""
        units = self._capacity.get(name)
        if units is None:
            units = self._capacity_of(name)
            if units < 1:
                raise InvalidArgumentError(f"lock {name!r} has capacity {units}; it must be >= 1")
            self._capacity[name] = units
        return units

    def holders(self, name: str) -> frozenset[str]:
        return frozenset(self._holders.get(name, ()))

    def busy_elsewhere(self) -> frozenset[str]:
        return frozenset(self._busy_elsewhere)

    def is_busy_elsewhere(self, name: str) -> bool:
        return name in self._busy_elsewhere

    def is_available(self, name: str) -> bool:
        return name not in self._unavailable

    def acquire(self, name: str, holder: str) -> bool:
        """Take one unit for `holder`; True if the lock is no longer available."""
        holders = self._holders.setdefault(name, set())
        holders.add(holder)
        return self._update(name, len(holders))

    def release(self, name: str, holder: str) -> bool:
        """Give back `holder`'s unit (idempotent); True if the lock became available."""
        holders = self._holders.get(name, set())
        holders.discard(holder)
        if not holders:
            self._holders.pop(name, None)
        return self._update(name, len(holders))

    def mark_busy_elsewhere(self, name: str) -> bool:
        """Another engine holds `name`; True if the lock was available until now."""
        self._busy_elsewhere.add(name)
        return self._update(name, len(self._holders.get(name, ())))

    def clear_busy_elsewhere(self, name: str) -> bool:
        """The other engine released `name`; True if the lock became available."""
        self._busy_elsewhere.discard(name)
        return self._update(name, len(self._holders.get(name, ())))

    def forget_if_idle(self, name: str) -> None:
        """Drop the cached capacity of a lock nobody holds, so lock names do not pile up."""
        if name not in self._holders and name not in self._busy_elsewhere:
            self._capacity.pop(name, None)

    def _update(self, name: str, held: int) -> bool:
        """Record the lock's availability; True if it flipped."""
        available = name not in self._busy_elsewhere and held < self.capacity(name)
        if available == (name not in self._unavailable):
            return False
        if available:
            self._unavailable.discard(name)
        else:
            self._unavailable.add(name)
        return True
