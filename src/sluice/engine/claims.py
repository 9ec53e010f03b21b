"""Quotas and locks a task claims before it runs (DESIGN.md sections 5 and 8).

A task declares quotas (`Quota("warehouse", units=2)`) and locks whose names are computed
from its inputs when its node starts (`"db/partition/{p}"`, once per item of a list input
with `for_each`, or a module-level function). Locks are resource namespaces `lock:<name>`
created on the fly, with a capacity from the first matching `resources.lock_rules` glob (1
when none matches). Everything is claimed through the resource manager in ONE all-or-nothing
allocation, after the task has a parallelism slot and before its plugin runs: no hold-and-wait,
so no deadlock. The leases are renewed while the task lives and released in finalize.

Rules:
- An attempt holds exactly what the resource store says it holds. An in-flight attempt that
  an engine loads (resumed after a crash or a takeover) is re-verified before it runs on
  (`reverify`): its claims are allocated again (idempotent: GRANTED while held, and a lapsed
  lease nobody took is granted again) and its plugin's tokens renewed. Anything no longer
  held stops the attempt (the handler aborts and finalizes it and puts the node back to
  waiting for its claims, a fresh attempt start that is not a user retry).
- `renew` returns what no longer holds; the engine then re-verifies the attempt the same way
  instead of letting it run on a token someone else may have been granted.
- Aborting, failing or finishing withdraws every waiter entry the node has in the manager
  (its claim's token, and the plugin's refused tokens), not only the tokens it holds.
"""

from __future__ import annotations

import contextlib
import fnmatch
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sluice.clock import Clock
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import DefinitionError, InputError, NotFoundError, SluiceError
from sluice.faults import crash_point
from sluice.modules import load_module, resolve_attribute
from sluice.plugins.core.phase import PhaseInfo
from sluice.resources import (
    AllocationStatus,
    Claim,
    Holder,
    QuotaManager,
    ResourceConstraintsSpec,
    ResourceManager,
    compose_token,
)
from sluice.spec.models import LockSpec, TaskSpec
from sluice.store.records import EventRecord

LOCK_PREFIX = "lock:"
WaitOn = Callable[[Sequence[str], str, str, str | None], None]
"""Re-evaluate (execution id, node id) when room may appear in one of these namespaces."""


def lock_capacity(rules: Mapping[str, int]) -> Callable[[str], int]:
    """Capacity of a lock name: the first glob rule (config order) that matches, else 1."""
    compiled = [(pattern, capacity) for pattern, capacity in rules.items()]

    def capacity(name: str) -> int:
        for pattern, value in compiled:
            if fnmatch.fnmatchcase(name, pattern):
                return value
        return 1

    return capacity


def lock_names(task: TaskSpec, inputs: Mapping[str, Any]) -> frozenset[str]:
    """The lock names a task needs with these inputs; DefinitionError names the bad spec."""
    names: set[str] = set()
    for spec in task.claims.locks:
        names.update(_names_of(spec, task, inputs))
    if any(not isinstance(n, str) or not n for n in names):
        raise DefinitionError(f"task {task.name!r}: lock names must be non-empty strings")
    return frozenset(names)


def _names_of(spec: LockSpec, task: TaskSpec, inputs: Mapping[str, Any]) -> list[str]:
    where = f"task {task.name!r} locks"
    if spec.function:
        return _call_lock_function(spec.function, task, inputs, where)
    values = dict(inputs)
    try:
        if not spec.for_each:
            return [spec.template.format_map(values)]
        items = inputs[spec.for_each]
        if not isinstance(items, list):
            raise DefinitionError(f"{where}: for_each input {spec.for_each!r} is not a list")
        return [spec.template.format_map({**values, "item": item}) for item in items]
    except (KeyError, IndexError, ValueError) as exc:
        fields = [f for _, f, _, _ in string.Formatter().parse(spec.template) if f]
        raise DefinitionError(
            f"{where}: template {spec.template!r} (fields {fields}) cannot be filled: {exc!r}"
        ) from None


def _call_lock_function(
    ref: str, task: TaskSpec, inputs: Mapping[str, Any], where: str
) -> list[str]:
    module, _, qualname = ref.partition(":")
    source = task.source
    file = source.file if source is not None and source.module == module else ""
    try:
        function = resolve_attribute(load_module(module, file), qualname)
        names = list(function(dict(inputs)))
    except NotFoundError as exc:
        raise DefinitionError(f"{where}: {exc}") from None
    except Exception as exc:
        raise DefinitionError(f"{where}: {ref} raised {exc!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise DefinitionError(f"{where}: {ref} must return lock names (str), got {names!r}")
    return names


class ClaimsGate:
    """Claims a node's quotas and locks in one allocation, and gives them back."""

    def __init__(
        self, manager: QuotaManager, capacity: Callable[[str], int], wait_on: WaitOn, clock: Clock
    ) -> None:
        self.clock = clock
        self.manager = manager
        self.capacity = capacity
        self._wait_on = wait_on

    @staticmethod
    def token(ex: ExecutionState, node: NodeState) -> str:
        """Stable for the node, so a retry or a restarted engine re-claims idempotently; composed
        as every stored token is (`compose_token`), so two tasks never share one."""
        rec = ex.record
        return compose_token(Holder(rec.project, rec.domain, rec.id, node.id), node.id)

    def holder(self, ex: ExecutionState, node: NodeState) -> Holder:
        rec = ex.record
        return Holder(rec.project, rec.domain, rec.id, node.id, node.task.metadata.priority)

    def claims(self, node: NodeState) -> list[Claim]:
        quotas = [Claim(q.namespace, q.units) for q in node.task.claims.quotas]
        locks = [
            Claim(LOCK_PREFIX + name, 1, default_quota=self.capacity(name))
            for name in sorted(node.lock_names or ())
        ]
        return quotas + locks

    async def acquire(
        self, ex: ExecutionState, node: NodeState
    ) -> tuple[PhaseInfo | None, str | None]:
        """(None, None) when the node holds everything it claims (or claims nothing);
        otherwise a waiting or permanent-failure PhaseInfo and the lock that blocks, if a
        lock blocks."""
        claims = self.claims(node)
        if not claims:
            return None, None
        try:
            result = await self.manager.allocate(
                self.token(ex, node), claims, self.holder(ex, node)
            )
        except (InputError, NotFoundError, DefinitionError) as exc:
            return PhaseInfo.permanent_failure("BadClaim", str(exc)), None
        except SluiceError as exc:
            self._wait_on([c.namespace for c in claims], ex.id, node.id, None)
            return PhaseInfo.waiting_for_resources(0, f"resource manager unavailable: {exc}"), None
        if result.granted:
            namespaces = [c.namespace for c in claims]
            node.record.claims = {
                **(node.record.claims or {}),
                "token": self.token(ex, node),
                "namespaces": namespaces,
            }
            ex.mark_changed(node)
            self._event(ex, node, "GRANTED", namespaces)
            crash_point("engine.after_claim")
            return None, None
        info = PhaseInfo.waiting_for_resources(0, result.reason())
        busy_lock = self.blocking_lock(result.namespace)
        if busy_lock is not None:
            # This engine's scheduler now orders the wait for that lock and asks again when it
            # is freed. Stop waiting in the manager's queues meanwhile: a waiter that does not
            # keep asking would reserve its other namespaces against engines that could use
            # them, and waiters of two engines could reserve locks for each other.
            await self._withdraw(ex, node, [c.namespace for c in claims])
        self._wait_on([c.namespace for c in claims], ex.id, node.id, self.token(ex, node))
        return info, busy_lock

    async def _withdraw(self, ex: ExecutionState, node: NodeState, namespaces: list[str]) -> None:
        with contextlib.suppress(SluiceError):
            await self.manager.release(self.token(ex, node), namespaces)

    def _event(
        self, ex: ExecutionState, node: NodeState, phase: str, namespaces: list[str]
    ) -> None:
        ex.events.append(
            EventRecord(
                execution_id=ex.id,
                node_id=node.id,
                attempt=node.record.attempt,
                phase=phase,
                occurred_at=self.clock.now(),
                reason=" ".join(namespaces),
                info={"namespaces": namespaces},
            )
        )

    @staticmethod
    def blocking_lock(reason_namespace: str | None) -> str | None:
        if reason_namespace and reason_namespace.startswith(LOCK_PREFIX):
            return reason_namespace[len(LOCK_PREFIX) :]
        return None

    async def release(self, ex: ExecutionState, node: NodeState) -> None:
        """Give back the task's claims and every token its plugin still holds, and withdraw
        every waiter entry the node left in the manager (a refused claim waits there)."""
        held = node.record.claims or {}
        if held:
            crash_point("engine.before_release")
        if held.get("token"):  # logged before the release: the log never overstates holding
            self._event(ex, node, "RELEASED", list(held.get("namespaces", [])))
        for token, namespaces in [*_held(held), *self._waits(ex, node, held)]:
            try:
                await self.manager.release(token, namespaces)
            except SluiceError:
                continue  # the lease returns the tokens if this release was lost
        if held:
            node.record.claims = None
            ex.mark_changed(node)

    def _waits(
        self, ex: ExecutionState, node: NodeState, held: Mapping[str, Any]
    ) -> list[tuple[str, list[str]]]:
        """Where the node may still wait in the manager's queues without holding."""
        waits = [(token, [namespace]) for namespace, token in held.get("plugin_waits", [])]
        if held.get("token") or not self._declares_claims(node):
            return waits
        with contextlib.suppress(SluiceError):
            if node.lock_names is None:
                node.lock_names = lock_names(node.task, node.record.inputs or {})
        namespaces = [c.namespace for c in self.claims(node)]
        return [(self.token(ex, node), namespaces), *waits] if namespaces else waits

    @staticmethod
    def _declares_claims(node: NodeState) -> bool:
        return bool(node.task.claims.quotas or node.task.claims.locks)

    async def renew(self, claims: Mapping[str, Any]) -> list[str]:
        """Extend every lease the node holds; the namespaces (with their tokens) where it no
        longer holds, for the engine to act on."""
        lost: list[str] = []
        for token, namespaces in _held(claims):
            still = await self.manager.renew(token, namespaces)
            lost.extend(f"{ns} ({token})" for ns in namespaces if ns not in still)
        return lost

    async def reverify(self, ex: ExecutionState, node: NodeState) -> str | None:
        """None when the in-flight attempt still holds everything the store says it holds
        (its claims allocated again, idempotently; its plugin's tokens renewed); otherwise why
        it must stop. SluiceError when the manager cannot answer (the caller retries)."""
        rec = node.record
        if self._declares_claims(node):
            if node.lock_names is None:
                node.lock_names = lock_names(node.task, rec.inputs or {})
            claims = self.claims(node)
            try:
                result = await self.manager.allocate(
                    self.token(ex, node), claims, self.holder(ex, node)
                )
            except (InputError, NotFoundError, DefinitionError) as exc:
                return f"its claim cannot be granted any more: {exc}"
            if not result.granted:
                return f"its claim is no longer held: {result.reason()}"
            namespaces = [c.namespace for c in claims]
            token = self.token(ex, node)
            rec.claims = {**(rec.claims or {}), "token": token, "namespaces": namespaces}
            ex.mark_changed(node)
        held = rec.claims or {}
        for namespace, token in held.get("plugin_tokens", []):
            if namespace not in await self.manager.renew(token, [namespace]):
                return f"its plugin's token {token} no longer holds {namespace}"
        return None


def _held(claims: Mapping[str, Any]) -> Iterable[tuple[str, list[str]]]:
    if claims.get("token"):
        yield claims["token"], list(claims.get("namespaces", []))
    for namespace, token in claims.get("plugin_tokens", []):
        yield token, [namespace]


class RecordingResourceManager:
    """The plugin-facing manager, recording what the plugin holds in the node's claims so the
    engine renews those leases while the task lives and releases them if the plugin does not."""

    def __init__(
        self,
        inner: ResourceManager,
        node: NodeState,
        ex: ExecutionState,
        on_refused: Callable[[str, str], None],
    ) -> None:
        self._inner = inner
        self._node = node
        self._ex = ex
        self._on_refused = on_refused

    async def allocate_resource(
        self,
        namespace: str,
        token: str,
        constraints: ResourceConstraintsSpec | None = None,
        units: int = 1,
    ) -> AllocationStatus:
        status = await self._inner.allocate_resource(namespace, token, constraints, units)
        granted = status is AllocationStatus.GRANTED
        self._remember(namespace, token, held=granted, waiting=not granted)
        if not granted:  # wake the task the moment a token it could use is released
            self._on_refused(*self._qualified(namespace, token))
        return status

    async def release_resource(self, namespace: str, token: str) -> None:
        await self._inner.release_resource(namespace, token)
        self._remember(namespace, token, held=False, waiting=False)

    async def explain(self, namespace: str, token: str) -> str:
        return await self._inner.explain(namespace, token)

    def _qualified(self, namespace: str, token: str) -> tuple[str, str]:
        qualify = getattr(self._inner, "qualify", None)
        if qualify is None:
            return namespace, token
        qualified_namespace, qualified_token = qualify(namespace, token)
        return qualified_namespace, qualified_token

    def _remember(self, namespace: str, token: str, *, held: bool, waiting: bool) -> None:
        """Held tokens are renewed and released by the engine; refused ones wait in the
        manager's queues, and the engine withdraws them when the task ends."""
        pair = list(self._qualified(namespace, token))
        claims = dict(self._node.record.claims or {})
        for key, keep in (("plugin_tokens", held), ("plugin_waits", waiting)):
            pairs = [p for p in claims.get(key, []) if p != pair]
            if keep:
                pairs.append(pair)
            if pairs or key in claims:
                claims[key] = pairs
        self._node.record.claims = claims
        self._ex.mark_changed(self._node)
