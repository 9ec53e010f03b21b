"""What a node holds and waits for in the resource manager, as its record stores it.

`NodeRecord.claims` is the one record of it, read after a crash to renew, re-verify and give
back exactly what the attempt holds. Only this class reads or writes it:
- "token", "namespaces": the task's own claim (its quotas and locks, one allocation);
- "locks": the lock names the node asks for, so `sluice locks ls` shows who waits for what;
- "plugin_tokens": [namespace, token] pairs (as stored) the task's plugin holds;
- "plugin_waits": pairs refused to the plugin, still waiting in the manager's queues.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from sluice.store.records import NodeRecord

_PLUGIN_KEYS = ("plugin_tokens", "plugin_waits")


class _Node(Protocol):
    @property
    def id(self) -> str: ...

    record: NodeRecord


class _Execution(Protocol):
    def mark_changed(self, node: Any) -> None: ...


def held_tokens(claims: Mapping[str, Any]) -> Iterable[tuple[str, list[str]]]:
    """(token, namespaces) of everything held: the task's claim, then each plugin token."""
    if claims.get("token"):
        yield claims["token"], list(claims.get("namespaces", []))
    for namespace, token in claims.get("plugin_tokens", []):
        yield token, [namespace]


class NodeHoldings:
    """One node's record of what it holds; every change marks the node for writing."""

    def __init__(self, ex: _Execution, node: _Node) -> None:
        self._ex = ex
        self._node = node

    @property
    def stored(self) -> Mapping[str, Any]:
        return self._node.record.claims or {}

    def _write(self, claims: dict[str, Any] | None) -> None:
        self._node.record.claims = claims
        self._ex.mark_changed(self._node)

    def held(self) -> list[tuple[str, list[str]]]:
        return list(held_tokens(self.stored))

    def plugin_waits(self) -> list[tuple[str, list[str]]]:
        """(token, [namespace]) of each plugin token refused and maybe still waiting."""
        return [(token, [namespace]) for namespace, token in self.stored.get("plugin_waits", [])]

    def declare_locks(self, names: Iterable[str]) -> None:
        self._write({**self.stored, "locks": sorted(names)})

    def claim_granted(self, token: str, namespaces: list[str]) -> None:
        self._write({**self.stored, "token": token, "namespaces": namespaces})

    def restart(self, lock_names: Iterable[str] | None) -> None:
        """A stopped attempt keeps only the locks it asks for (it has given back the rest)."""
        if lock_names:
            self._node.record.claims = {"locks": sorted(lock_names)}

    def clear(self) -> None:
        if self._node.record.claims:
            self._write(None)

    # The PluginHoldings protocol (sluice.resources.proxy): the plugin's own tokens.
    def plugin_held(self, namespace: str, token: str) -> None:
        self._plugin(namespace, token, held=True, waiting=False)

    def plugin_refused(self, namespace: str, token: str) -> None:
        self._plugin(namespace, token, held=False, waiting=True)

    def plugin_released(self, namespace: str, token: str) -> None:
        self._plugin(namespace, token, held=False, waiting=False)

    def _plugin(self, namespace: str, token: str, *, held: bool, waiting: bool) -> None:
        """Held tokens are renewed and released by the engine; refused ones wait in the
        manager's queues, and the engine withdraws them when the task ends."""
        pair = [namespace, token]
        claims = dict(self.stored)
        for key, keep in zip(_PLUGIN_KEYS, (held, waiting), strict=True):
            pairs = [p for p in claims.get(key, []) if p != pair]
            if keep:
                pairs.append(pair)
            if pairs or key in claims:
                claims[key] = pairs
        self._write(claims)
