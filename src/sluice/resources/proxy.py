"""What plugins see of the resource manager: a registrar and a per-task manager that qualify
their names (Flyte's resource registrar and resource manager proxies)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.resources.models import (
    AllocationResult,
    AllocationStatus,
    Claim,
    Holder,
    ResourceConstraintsSpec,
    sub_namespace,
)

if TYPE_CHECKING:
    from sluice.resources.manager import QuotaManager

EXECUTION_TOKEN_PREFIX = "ex"


def compose_token(holder: Holder, token: str) -> str:
    """The stored token: `ex:<project>:<domain>:<execution>-<token>`, each part escaped so
    that two different tasks never compose the same one: `%` and `:` in the project, domain
    and execution, and `-` in the execution, become `%25`, `%3A` and `%2D` (names without
    them read as in Flyte). The token, last, needs no escaping."""
    project, domain = _escape(holder.project), _escape(holder.domain)
    execution = _escape(holder.execution_id).replace("-", "%2D")
    return f"{EXECUTION_TOKEN_PREFIX}:{project}:{domain}:{execution}-{token}"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


class PluginRegistrar:
    """A plugin's ResourceRegistrar: its namespaces become `<plugin id>:<namespace>`."""

    def __init__(self, manager: QuotaManager, plugin_id: str) -> None:
        self._manager = manager
        self._plugin_id = plugin_id

    def register_resource_quota(self, namespace: str, quota: int) -> None:
        self._manager.register_plugin_quota(sub_namespace(self._plugin_id, namespace), quota)


class TaskResourceManager:
    """The ResourceManager one task's plugin gets: namespaces qualified by the plugin id,
    tokens by the execution, claims by the task's project and domain."""

    def __init__(self, manager: QuotaManager, plugin_id: str, holder: Holder) -> None:
        self._manager = manager
        self._plugin_id = plugin_id
        self._holder = holder
        self._last: dict[tuple[str, str], AllocationResult] = {}

    def qualify(self, namespace: str, token: str) -> tuple[str, str]:
        """The namespace and token as stored."""
        return sub_namespace(self._plugin_id, namespace), compose_token(self._holder, token)

    @property
    def allocations(self) -> tuple[tuple[str, str], ...]:
        """(namespace, token) pairs, as stored, granted through this proxy and not released:
        what the engine renews while the task lives."""
        return tuple(self.qualify(*key) for key, result in self._last.items() if result.granted)

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
        return result.status

    async def release_resource(self, namespace: str, token: str) -> None:
        qualified_ns, qualified_token = self.qualify(namespace, token)
        await self._manager.release(qualified_token, [qualified_ns])
        self._last.pop((namespace, token), None)

    async def explain(self, namespace: str, token: str) -> str:
        last = self._last.get((namespace, token))
        if last is not None:
            return last.reason()
        return await self._manager.explain(*self.qualify(namespace, token))
