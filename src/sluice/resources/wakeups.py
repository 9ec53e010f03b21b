"""Who to wake when room appears: the manager's subscribers, but only when a claim this
process saw refused may now be granted."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

from sluice.resources.backends.base import NamespaceUsage
from sluice.resources.models import Victim

log = logging.getLogger(__name__)
Subscriber = Callable[[str], None]
ReadySubscriber = Callable[[str, tuple[str, ...] | None], None]
"""Called with a namespace and the tokens that may now be granted there (None: anyone)."""
PreemptedSubscriber = Callable[[str, tuple[str, ...]], None]
"""Called with a label and the held tokens just marked for preemption."""


class WakeUps:
    """Subscribers, and the tokens refused through this process that may be waiting."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._ready_subscribers: list[ReadySubscriber] = []
        self._asking: dict[str, float] = {}  # token -> when its waiter entries lapse
        self._called: set[str] = set()  # waiting tokens a wake-up named as ready
        self._preempted_subscribers: list[PreemptedSubscriber] = []

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def subscribe_ready(self, callback: ReadySubscriber) -> Callable[[], None]:
        self._ready_subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._ready_subscribers.remove(callback)

        return unsubscribe

    def subscribe_preempted(self, callback: PreemptedSubscriber) -> Callable[[], None]:
        self._preempted_subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._preempted_subscribers.remove(callback)

        return unsubscribe

    def preempting(self, victims: Iterable[Victim]) -> None:
        """Holders of this process were (maybe) marked for preemption: tell their engine
        now rather than at its next renewal."""
        tokens = tuple(dict.fromkeys(v.token for v in victims))
        for callback in list(self._preempted_subscribers):
            _call(callback, ",".join(tokens), tokens)

    def refused(self, token: str, until: float) -> None:
        self._asking[token] = until
        self._called.discard(token)

    def expects_refusal(self, token: str) -> bool:
        """Refused before and not named ready since: asking again will likely be refused."""
        return token in self._asking and token not in self._called

    def waiting(self, token: str) -> bool:
        """Refused before and neither granted nor released since (named ready or not)."""
        return token in self._asking

    def settled(self, token: str) -> None:
        """The token was granted or released: it no longer waits."""
        self._asking.pop(token, None)
        self._called.discard(token)

    def forget_lapsed(self, now: float) -> None:
        self._asking = {token: until for token, until in self._asking.items() if until > now}
        self._called &= set(self._asking)

    def ready(self, usage: Iterable[NamespaceUsage]) -> None:
        for entry in usage:
            self.on_ready(entry.namespace, entry.ready)

    def on_ready(self, namespace: str, ready: tuple[str, ...] | None) -> None:
        # Every release waking every waiter would have them all ask and all but one be
        # refused again; so where waiters queue, only a process with a waiter that would now
        # be granted wakes. Where nobody queues (ready is None), everyone may try.
        mine = [token for token in ready or () if token in self._asking]
        self._called.update(mine)
        if ready is None or mine:
            self.wake([namespace], None if ready is None else tuple(mine))

    def wake(self, namespaces: Iterable[str], ready: tuple[str, ...] | None = None) -> None:
        """Call every subscriber for each namespace; a failing one does not stop the rest."""
        for namespace in dict.fromkeys(namespaces):
            for callback in list(self._subscribers):
                _call(callback, namespace)
            for ready_callback in list(self._ready_subscribers):
                _call(ready_callback, namespace, ready)


def _call(callback: Callable[..., None], *args: object) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("resource wake-up callback failed for %s", args[0])
