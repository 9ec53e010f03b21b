"""Idempotent creation: a caller's key makes a retried create return the execution the first
one created, instead of a second execution.

A key is scoped to a project and lives `concurrency.idempotency_retention` seconds (24 h by
default) from its first use. Within that window the same key with the same request returns
the execution it created (`Launched.replayed`); with a different request (another launch
plan or workflow, other inputs or options: a canonical hash of them differs) it is a
ConflictError naming the key. After the window the key is free again.

Atomic: the key is claimed in the very transaction that writes the execution (the store's
primary key on (project, key) makes two concurrent claims one winner and one reader of the
winner's row), so a crash leaves both or neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice.clock import Clock
from sluice.errors import ConflictError, InvalidArgumentError
from sluice.executions.launch import ClaimLimits, prepare_execution, write_execution
from sluice.faults import crash_point
from sluice.spec.canonical import digest
from sluice.spec.keys import KEY_MAX_LENGTH
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.store.idempotency import IdempotencyRepository, KeyRecord
from sluice.store.notify import Notifier
from sluice.store.records import ExecutionRecord
from sluice.store.store import Repos, Store


@dataclass(frozen=True)
class IdempotencyKey:
    """A caller's key and the hash of the request it came with (`request_hash`)."""

    key: str
    request_hash: str
    retention: float


@dataclass(frozen=True)
class Launched:
    record: ExecutionRecord
    replayed: bool
    """True when the key had created this execution already (nothing new was written)."""


def check_key(key: str) -> str:
    """A usable key: 1 to 255 printable characters; InvalidArgumentError naming it if not."""
    if not isinstance(key, str) or not key or len(key) > KEY_MAX_LENGTH or not key.isprintable():
        raise InvalidArgumentError(
            f"idempotency key {str(key)[:80]!r} must be 1 to {KEY_MAX_LENGTH} printable characters"
        )
    return key


def request_hash(
    project: str,
    domain: str,
    target: str,
    inputs: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
) -> str:
    """The canonical hash of what a create asks for: where, what (`target`, e.g.
    "launch_plan:nightly"), with which inputs (as given) and options."""
    return digest("create", project, domain, target, dict(inputs), dict(options or {}))


async def create_once(
    store: Store,
    notifier: Notifier | None,
    clock: Clock,
    key: IdempotencyKey,
    *,
    project: str,
    domain: str,
    workflow: WorkflowSpec,
    inputs: Mapping[str, Any],
    launch_plan: LaunchPlanSpec | None = None,
    options: Mapping[str, Any] | None = None,
    limits: ClaimLimits | None = None,
) -> Launched:
    """`create_execution` under an idempotency key (see the module docstring)."""
    now = clock.now()
    record = await prepare_execution(
        project, domain, workflow, inputs, launch_plan, options, now, limits
    )
    claim = KeyRecord(project, key.key, key.request_hash, record.id, now, now + key.retention)
    async with store.write() as repos:
        holder = await IdempotencyRepository(repos.conn).claim(claim, now)
        if holder is not None:
            return Launched(await _replayed(repos, holder, key), True)
        crash_point("launch.after_idempotency_key")
        written = await write_execution(repos, notifier, record, workflow, launch_plan)
        assert written, "a new execution id cannot exist already"
    return Launched(record, False)


async def _replayed(repos: Repos, holder: KeyRecord, key: IdempotencyKey) -> ExecutionRecord:
    if holder.request_hash != key.request_hash:
        raise ConflictError(
            f"idempotency key {key.key!r} was used for a different request (execution "
            f"{holder.execution_id}): a retry must send the same launch plan, inputs and "
            "options, or use a new key"
        )
    found = await repos.executions.get(holder.execution_id)
    assert found is not None, "a key is written with its execution"
    return found
