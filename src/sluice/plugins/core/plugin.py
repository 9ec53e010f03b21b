"""The plugin contract: a Plugin drives one kind of task; a PluginEntry says how to load it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sluice.errors import PluginUnavailableError
from sluice.plugins.core.context import SetupContext, TaskExecutionContext
from sluice.plugins.core.phase import Transition
from sluice.spec.models import TaskSpec


@dataclass(frozen=True)
class PluginProperties:
    disable_node_level_caching: bool = False
    """The engine skips cache lookups, puts and reservations for this plugin's tasks."""
    generated_name_max_length: int | None = None
    """Longest generated name the plugin's external system accepts; at least 8."""
    inline_calls: bool = False
    """handle, abort and finalize return at once (they await nothing slow): the engine awaits
    them in the reconcile's own task, with no task, loop turn or timer per call. Their time
    bound is then not enforced: only for plugins whose calls only hand work elsewhere."""


@runtime_checkable
class Plugin(Protocol):
    """Drives tasks of some types. Every method is idempotent; `handle` never blocks.

    `handle` is called repeatedly until it reports a terminal phase. `abort` stops the task
    (called on abort and timeout). `finalize` is always called once the task is terminal or
    aborted, to release what the attempt holds. An exception from any of them becomes a system
    error of that task, never a crash of the engine.

    A plugin may also offer `validate_task(task: TaskSpec) -> None`, raising
    InvalidPluginConfigError naming the bad field of the task's config: it is called for every
    task when an execution is launched, before anything is written.

    A plugin whose optional driver is missing may offer `unavailable: str | None`, the
    reason with its install hint: the launch of any of its tasks is refused naming it, and
    `plugins ls` lists the plugin as not loaded, with the reason.
    """

    @property
    def id(self) -> str: ...

    @property
    def properties(self) -> PluginProperties: ...

    async def handle(self, ctx: TaskExecutionContext) -> Transition: ...

    async def abort(self, ctx: TaskExecutionContext) -> None: ...

    async def finalize(self, ctx: TaskExecutionContext) -> None: ...


PluginLoader = Callable[[SetupContext], "Plugin | Awaitable[Plugin]"]


@dataclass(frozen=True)
class PluginEntry:
    """How to load a plugin: its id, the task types it handles, and a loader.

    `is_default` makes it the catch-all for task types no other plugin handles;
    `default_for_task_types` makes it the choice when several plugins handle a type.
    """

    id: str
    task_types: tuple[str, ...]
    load: PluginLoader
    is_default: bool = False
    default_for_task_types: tuple[str, ...] = field(default=())


def unavailable_reason(plugin: object) -> str | None:
    """Why the plugin cannot run tasks here (a missing driver, with its hint); None if it can."""
    reason = getattr(plugin, "unavailable", None)
    return reason if isinstance(reason, str) and reason else None


def validate_task(plugin: object, task: TaskSpec) -> None:
    """Refuse a task whose plugin is unavailable, then run the plugin's optional
    `validate_task` hook on it."""
    reason = unavailable_reason(plugin)
    if reason is not None:
        plugin_id = getattr(plugin, "id", type(plugin).__name__)
        raise PluginUnavailableError(
            f"task {task.name!r} needs plugin {plugin_id!r}, which is unavailable: {reason}"
        )
    check = getattr(plugin, "validate_task", None)
    if check is not None:
        check(task)
