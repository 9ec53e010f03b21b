"""What plugins see of the resource manager: a registrar and a per-task manager that qualify
their names (Flyte's resource registrar and resource manager proxies)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from sluice.resources.models import (
    AllocationResult,
    AllocationStatus,
    Claim,
    Holder,
    ResourceConstraintsSpec,
    sub_namespace,
)

EXECUTION_TOKEN_PREFIX = "ex"


def compose_token(holder: Holder, token: str) -> str:
    """The stored token: `ex:<project>:<domain>:<execution>-<token>`, each part escaped so
    that two different tasks never compose the same one: `%` and `:` in the project, domain
    and execution, and `-` in the execution, become `%25`, `%3A` and `%2D` (names without
    them read as in Flyte). The token, last, needs no escaping."""
    project, domain = _escape(holder.project), _escape(holder.domain)
    execution = _escape(holder.execution_id).replace("-", "%2D")
    return f"{EXECUTION_TOKEN_PREFIX}:{project}:{domain}:{execution}-{token}"


def with_epoch(token: str, epoch: int) -> str:
    """`token` (as stored) named for ownership `epoch`: its earlier epoch suffix replaced. Each
    claim of an execution is a new epoch, and every token its tasks hold ends in "@<epoch>",
    so what an earlier owner still sends (a renewal, a release) names tokens nobody holds any
    more once the new owner has taken them over (QuotaManager.transfer)."""
    base, sep, tail = token.rpartition("@")
    return f"{base if sep and tail.isdigit() else token}@{epoch}"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


class QuotaPolicy(Protocol):
    """What the proxies need of the QuotaManager (manager.py), which builds them."""

    def register_plugin_quota(self, namespace: str, quota: int) -> None: ...

    async def allocate(
        self, token: str, claims: Sequence[Claim], holder: Holder
    ) -> AllocationResult: ...

    async def release(self, token: str, namespaces: Sequence[str]) -> None: ...

    async def explain(self, namespace: str, token: str) -> str: ...


class PluginRegistrar:
    """A plugin's ResourceRegistrar: its namespaces become `<plugin id>:<namespace>`."""

    def __init__(self, manager: QuotaPolicy, plugin_id: str) -> None:
        self._manager = manager
        self._plugin_id = plugin_id

    def register_resource_quota(self, namespace: str, quota: int) -> None:
        self._manager.register_plugin_quota(sub_namespace(self._plugin_id, namespace), quota)


class PluginHoldings(Protocol):
    """Where a task's plugin tokens are recorded, as stored (namespace, token): the engine
    renews the held ones while the task lives and gives back, or withdraws, the rest when it
    ends."""

    def plugin_held(self, namespace: str, token: str) -> None: ...

    def plugin_refused(self, namespace: str, token: str) -> None: ...

    def plugin_released(self, namespace: str, token: str) -> None: ...


class HeldInMemory:
    """PluginHoldings for a proxy used outside the engine: the pairs held, in grant order."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str], None] = {}

    def plugin_held(self, namespace: str, token: str) -> None:
        self.held[(namespace, token)] = None

    def plugin_refused(self, namespace: str, token: str) -> None:
        self.held.pop((namespace, token), None)

    def plugin_released(self, namespace: str, token: str) -> None:
        self.held.pop((namespace, token), None)


def _ignore(namespace: str, token: str) -> None:
    return None


class TaskResourceManager:
    """The ResourceManager one task's plugin gets: namespaces qualified by the plugin id,
    tokens by the execution, claims by the task's project and domain. What the plugin holds
    is recorded in `holdings` (the engine's record of the node); `on_refused` hears of each
    refused (namespace, token), as stored, so the task is woken when room appears."""

    def __init__(
        self,
        manager: QuotaPolicy,
        plugin_id: str,
        holder: Holder,
        holdings: PluginHoldings | None = None,
        on_refused: Callable[[str, str], None] | None = None,
        epoch: int | None = None,
    ) -> None:
        self._manager = manager
        self._plugin_id = plugin_id
        self._holder = holder
        self._epoch = epoch
        self._memory = HeldInMemory()
        self._holdings: PluginHoldings = self._memory if holdings is None else holdings
        self._on_refused = on_refused or _ignore
        self._last: dict[tuple[str, str], AllocationResult] = {}
        """The last answer to each (namespace, token), for `explain`."""

    def qualify(self, namespace: str, token: str) -> tuple[str, str]:
        """The namespace and token as stored (named for the ownership epoch, if any)."""
        stored = compose_token(self._holder, token)
        if self._epoch is not None:
            stored = f"{stored}@{self._epoch}"
        return sub_namespace(self._plugin_id, namespace), stored

    @property
    def allocations(self) -> tuple[tuple[str, str], ...]:
        """(namespace, token) pairs, as stored, granted through this proxy and not released,
        when it records them itself (no `holdings` given)."""
        return tuple(self._memory.held)

    async def allocate_resource(
        self,
        namespace: str,
        token: str,
        constraints: ResourceConstraintsSpec | None = None,
        units: int = 1,
    ) -> AllocationStatus:
        qualified_ns, qualified_token = self.qualify(namespace, token)
        claim = Claim(qualified_ns, units, constraints)
        result = await self._manager.allocate(qualified_token, [claim], self._holder)
        self._last[(namespace, token)] = result
        if result.granted:
            self._holdings.plugin_held(qualified_ns, qualified_token)
        else:
            self._holdings.plugin_refused(qualified_ns, qualified_token)
            self._on_refused(qualified_ns, qualified_token)
        return result.status

    async def release_resource(self, namespace: str, token: str) -> None:
        qualified_ns, qualified_token = self.qualify(namespace, token)
        await self._manager.release(qualified_token, [qualified_ns])
        self._last.pop((namespace, token), None)
        self._holdings.plugin_released(qualified_ns, qualified_token)

    async def explain(self, namespace: str, token: str) -> str:
        last = self._last.get((namespace, token))
        if last is not None:
            return last.reason()
        return await self._manager.explain(*self.qualify(namespace, token))
