"""The plugin registry: validated entries, loading, and resolution of a task type to a plugin.

Resolution order for a task type (DESIGN.md section 4): a per-execution override, then the
configured default for the type, then the single plugin registered for the type, then the
default (catch-all) plugin; otherwise an error naming the registered plugins.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points

from sluice.errors import PluginError, PluginNotFoundError
from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import Plugin, PluginEntry, unavailable_reason

ENTRY_POINT_GROUP = "sluice.plugins"
MIN_GENERATED_NAME_LENGTH = 8


def validate_entry(entry: object) -> PluginEntry:
    """Raise PluginError naming what is wrong with a would-be entry."""
    if not isinstance(entry, PluginEntry):
        raise PluginError(f"plugin entry must be a PluginEntry, got {entry!r}")
    if not entry.id or not entry.id.strip():
        raise PluginError(f"plugin entry has an empty id: {entry!r}")
    if not entry.task_types or not all(isinstance(t, str) and t for t in entry.task_types):
        raise PluginError(f"plugin {entry.id!r} registers no task types")
    if not callable(entry.load):
        raise PluginError(f"plugin {entry.id!r} has no loader")
    return entry


def discover_entry_points(group: str = ENTRY_POINT_GROUP) -> list[PluginEntry]:
    """Entries of installed third-party packages: each entry point names a PluginEntry, or a
    callable returning one or a list of them."""
    found: list[PluginEntry] = []
    for point in entry_points(group=group):
        try:
            target = point.load()
            value = target() if callable(target) and not isinstance(target, PluginEntry) else target
        except Exception as exc:
            raise PluginError(f"entry point {point.name!r} ({point.value}) failed: {exc}") from exc
        for entry in value if isinstance(value, list | tuple) else [value]:
            try:
                found.append(validate_entry(entry))
            except PluginError as exc:
                raise PluginError(f"entry point {point.name!r} ({point.value}): {exc}") from None
    return found


class PluginRegistry:
    """Entries by id; after `load`, plugins by id and the task-type routing table."""

    def __init__(
        self,
        entries: Iterable[PluginEntry] = (),
        *,
        enabled: Sequence[str] | None = None,
        default_for_task_types: Mapping[str, str] | None = None,
    ) -> None:
        self._entries: dict[str, PluginEntry] = {}
        self._enabled = {e.strip().lower() for e in enabled} if enabled is not None else None
        self._configured_defaults = dict(default_for_task_types or {})
        self._plugins: dict[str, Plugin] = {}
        self._by_type: dict[str, list[str]] = {}
        self._defaults: dict[str, str] = {}
        self._catch_all: str | None = None
        for entry in entries:
            self.register(entry)

    def register(self, entry: PluginEntry) -> None:
        validate_entry(entry)
        if entry.id in self._entries:
            raise PluginError(f"plugin id {entry.id!r} is registered twice")
        self._entries[entry.id] = entry

    @property
    def entries(self) -> list[PluginEntry]:
        return list(self._entries.values())

    @property
    def plugins(self) -> dict[str, Plugin]:
        return dict(self._plugins)

    def unavailable(self) -> dict[str, str]:
        """Loaded plugins that cannot run tasks here (a missing driver), with the reason."""
        reasons = {pid: unavailable_reason(p) for pid, p in self._plugins.items()}
        return {pid: reason for pid, reason in reasons.items() if reason is not None}

    def is_enabled(self, plugin_id: str) -> bool:
        return self._enabled is None or plugin_id.lower() in self._enabled

    async def load(self, setup: Callable[[PluginEntry], SetupContext]) -> None:
        """Load every enabled entry, then build the routing table; raise on any conflict."""
        unknown = (self._enabled or set()) - {e.lower() for e in self._entries}
        if unknown:
            raise PluginError(
                f"enabled plugins {sorted(unknown)} are not registered; "
                f"registered: {sorted(self._entries)}"
            )
        for entry in self._entries.values():
            if self.is_enabled(entry.id):
                self._plugins[entry.id] = await self._load_one(entry, setup(entry))
                self._route(entry)
        self._check_routing()

    async def _load_one(self, entry: PluginEntry, ctx: SetupContext) -> Plugin:
        try:
            loaded = entry.load(ctx)
            plugin = await loaded if inspect.isawaitable(loaded) else loaded
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin {entry.id!r} failed to load: {exc}") from exc
        limit = plugin.properties.generated_name_max_length
        if limit is not None and limit < MIN_GENERATED_NAME_LENGTH:
            raise PluginError(
                f"plugin {entry.id!r}: generated_name_max_length must be >= "
                f"{MIN_GENERATED_NAME_LENGTH}, got {limit}"
            )
        return plugin

    def _route(self, entry: PluginEntry) -> None:
        for task_type in entry.task_types:
            self._by_type.setdefault(task_type, []).append(entry.id)
        for task_type in entry.default_for_task_types:
            if self._defaults.get(task_type, entry.id) != entry.id:
                raise PluginError(
                    f"task type {task_type!r} has two default plugins: "
                    f"{self._defaults[task_type]!r} and {entry.id!r}"
                )
            self._defaults[task_type] = entry.id
        if entry.is_default and self._catch_all is None:
            self._catch_all = entry.id

    def _check_routing(self) -> None:
        for task_type, plugin_id in self._configured_defaults.items():
            if plugin_id not in self._plugins:
                raise PluginError(
                    f"plugins.default_for_task_types[{task_type!r}] = {plugin_id!r} is not a "
                    f"loaded plugin; loaded: {sorted(self._plugins)}"
                )
            self._defaults[task_type] = plugin_id
        for task_type, ids in self._by_type.items():
            if len(ids) > 1 and task_type not in self._defaults:
                raise PluginError(
                    f"task type {task_type!r} is handled by {sorted(ids)}; choose one with "
                    f"plugins.default_for_task_types"
                )

    def resolve(self, task_type: str, overrides: Sequence[str] = ()) -> Plugin:
        """The plugin for `task_type`, in the documented resolution order."""
        for plugin_id in overrides:
            if plugin_id in self._plugins:
                return self._plugins[plugin_id]
        chosen = self._defaults.get(task_type)
        if chosen is None and len(self._by_type.get(task_type, [])) == 1:
            chosen = self._by_type[task_type][0]
        chosen = chosen or self._catch_all
        if chosen is None:
            raise PluginNotFoundError(
                f"no plugin handles task type {task_type!r}; registered plugins: "
                + ", ".join(
                    f"{pid} ({', '.join(self._entries[pid].task_types)})"
                    for pid in sorted(self._plugins)
                )
            )
        return self._plugins[chosen]

    def task_types(self) -> dict[str, list[str]]:
        return {t: list(ids) for t, ids in self._by_type.items()}
