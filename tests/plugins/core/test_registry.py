"""PluginRegistry: entry validation, loading, routing of task types, entry-point discovery."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import sluice.plugins.core.registry as registry_module
from sluice.clock import FakeClock
from sluice.errors import PluginError, PluginNotFoundError
from sluice.plugins.core import (
    ENTRY_POINT_GROUP,
    UNKNOWN_TRANSITION,
    Plugin,
    PluginEntry,
    PluginProperties,
    PluginRegistry,
    SetupContext,
    Transition,
    discover_entry_points,
)


@dataclass
class FakePlugin:
    id: str
    properties: PluginProperties = field(default_factory=PluginProperties)
    setup: SetupContext | None = None

    async def handle(self, ctx: Any) -> Transition:
        return UNKNOWN_TRANSITION

    async def abort(self, ctx: Any) -> None:
        return None

    async def finalize(self, ctx: Any) -> None:
        return None


class NoSecrets:
    def get(self, name: str) -> str:
        raise KeyError(name)


def setup_for(entry: PluginEntry) -> SetupContext:
    return SetupContext(
        plugin_id=entry.id,
        registrar=None,  # type: ignore[arg-type]
        metrics=CollectorRegistry(),
        secrets=NoSecrets(),
        config={"for": entry.id},
        clock=FakeClock(),
    )


def entry(
    plugin_id: str,
    *task_types: str,
    is_default: bool = False,
    default_for: tuple[str, ...] = (),
    properties: PluginProperties | None = None,
    loaded: list[str] | None = None,
) -> PluginEntry:
    def load(ctx: SetupContext) -> Plugin:
        if loaded is not None:
            loaded.append(plugin_id)
        return FakePlugin(plugin_id, properties or PluginProperties(), ctx)

    return PluginEntry(
        id=plugin_id,
        task_types=task_types,
        load=load,
        is_default=is_default,
        default_for_task_types=default_for,
    )


async def loaded(*entries: PluginEntry, **options: Any) -> PluginRegistry:
    registry = PluginRegistry(entries, **options)
    await registry.load(setup_for)
    return registry


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (PluginEntry(id="", task_types=("x",), load=lambda ctx: None), "empty id"),  # type: ignore[arg-type, return-value]
        (PluginEntry(id="  ", task_types=("x",), load=lambda ctx: None), "empty id"),  # type: ignore[arg-type, return-value]
        (PluginEntry(id="p", task_types=(), load=lambda ctx: None), "'p' registers no task types"),  # type: ignore[arg-type, return-value]
        (
            PluginEntry(id="p", task_types=("",), load=lambda ctx: None),
            "'p' registers no task types",
        ),  # type: ignore[arg-type, return-value]
        (PluginEntry(id="p", task_types=("x",), load="not callable"), "'p' has no loader"),  # type: ignore[arg-type]
        ("not an entry", "must be a PluginEntry"),
    ],
)
def test_invalid_entries_are_refused_with_a_message(bad: Any, fragment: str) -> None:
    with pytest.raises(PluginError, match=fragment):
        PluginRegistry([bad])


def test_duplicate_id_is_refused() -> None:
    registry = PluginRegistry([entry("python", "python")])
    with pytest.raises(PluginError, match="'python' is registered twice"):
        registry.register(entry("python", "other"))
    assert [e.id for e in registry.entries] == ["python"]


async def test_loading_gives_each_plugin_its_setup_context() -> None:
    registry = await loaded(entry("a", "x"), entry("b", "y"))
    plugins = registry.plugins
    assert sorted(plugins) == ["a", "b"]
    first = plugins["a"]
    assert isinstance(first, FakePlugin) and first.setup is not None
    assert (first.setup.plugin_id, first.setup.config) == ("a", {"for": "a"})
    assert registry.task_types() == {"x": ["a"], "y": ["b"]}


async def test_async_loaders_are_awaited() -> None:
    async def load(ctx: SetupContext) -> Plugin:
        return FakePlugin("async")

    registry = await loaded(PluginEntry("async", ("x",), load))
    assert registry.resolve("x").id == "async"


async def test_a_failing_loader_is_a_plugin_error_naming_it() -> None:
    def load(ctx: SetupContext) -> Plugin:
        raise RuntimeError("no credentials")

    with pytest.raises(PluginError, match=r"'broken' failed to load: no credentials"):
        await loaded(PluginEntry("broken", ("x",), load))


@pytest.mark.parametrize("length", [0, 1, 7])
async def test_generated_name_max_length_below_8_is_refused_at_load(length: int) -> None:
    short = entry("k8s", "pod", properties=PluginProperties(generated_name_max_length=length))
    with pytest.raises(PluginError) as caught:
        await loaded(short)
    assert "'k8s'" in str(caught.value)
    assert "generated_name_max_length" in str(caught.value)
    assert str(length) in str(caught.value)


async def test_generated_name_max_length_of_8_or_none_is_fine() -> None:
    registry = await loaded(
        entry("a", "x", properties=PluginProperties(generated_name_max_length=8)),
        entry("b", "y", properties=PluginProperties(generated_name_max_length=None)),
    )
    assert sorted(registry.plugins) == ["a", "b"]


# --- resolution ------------------------------------------------------------------------------


async def test_single_plugin_for_a_type() -> None:
    registry = await loaded(entry("python", "python"), entry("shell", "shell", "bash"))
    assert registry.resolve("python").id == "python"
    assert registry.resolve("bash").id == "shell"


async def test_per_execution_override_comes_first() -> None:
    registry = await loaded(
        entry("python", "python", default_for=("python",)),
        entry("ray", "ray"),
        entry("fallback", "misc", is_default=True),
    )
    assert registry.resolve("python", overrides=["ray"]).id == "ray"
    assert registry.resolve("python", overrides=["missing", "ray"]).id == "ray"
    assert registry.resolve("python", overrides=["missing"]).id == "python"


async def test_configured_default_wins_over_the_single_plugin_and_entry_defaults() -> None:
    registry = await loaded(
        entry("python", "python", default_for=("python",)),
        entry("alt", "python"),
        entry("shell", "shell"),
        default_for_task_types={"python": "alt", "shell": "python"},
    )
    assert registry.resolve("python").id == "alt"
    assert registry.resolve("shell").id == "python"


async def test_entry_default_for_task_types_settles_a_shared_type() -> None:
    registry = await loaded(
        entry("local", "python"), entry("pool", "python", default_for=("python",))
    )
    assert registry.resolve("python").id == "pool"


async def test_the_default_plugin_catches_unknown_types() -> None:
    registry = await loaded(entry("python", "python", is_default=True), entry("shell", "shell"))
    assert registry.resolve("anything").id == "python"
    assert registry.resolve("shell").id == "shell"  # a plugin for the type comes first


async def test_first_default_plugin_wins_as_in_flyte() -> None:
    registry = await loaded(entry("a", "x", is_default=True), entry("b", "y", is_default=True))
    assert registry.resolve("z").id == "a"


async def test_no_plugin_is_an_error_naming_the_registered_plugins() -> None:
    registry = await loaded(entry("python", "python"), entry("shell", "shell", "bash"))
    with pytest.raises(PluginNotFoundError) as caught:
        registry.resolve("spark")
    message = str(caught.value)
    assert "'spark'" in message
    assert "python (python)" in message
    assert "shell (shell, bash)" in message


async def test_two_plugins_for_one_type_without_a_default_is_an_error_at_load() -> None:
    with pytest.raises(PluginError) as caught:
        await loaded(entry("a", "python"), entry("b", "python"))
    message = str(caught.value)
    assert "'python'" in message and "['a', 'b']" in message
    assert "default_for_task_types" in message


async def test_two_entry_defaults_for_one_type_conflict() -> None:
    with pytest.raises(PluginError) as caught:
        await loaded(
            entry("a", "python", default_for=("python",)),
            entry("b", "python", default_for=("python",)),
        )
    assert "two default plugins" in str(caught.value)
    assert "'a'" in str(caught.value) and "'b'" in str(caught.value)


async def test_configured_default_must_be_a_loaded_plugin() -> None:
    with pytest.raises(PluginError) as caught:
        await loaded(entry("a", "python"), default_for_task_types={"python": "ghost"})
    assert "'ghost'" in str(caught.value)
    assert "['a']" in str(caught.value)


# --- enabled list ----------------------------------------------------------------------------


async def test_enabled_list_filters_what_is_loaded() -> None:
    calls: list[str] = []
    registry = await loaded(
        entry("python", "python", loaded=calls),
        entry("shell", "shell", loaded=calls),
        entry("ray", "python", loaded=calls),
        enabled=["Python", " shell "],
    )
    assert calls == ["python", "shell"]  # ray is never loaded, so python is not ambiguous
    assert sorted(registry.plugins) == ["python", "shell"]
    assert registry.is_enabled("PYTHON") and not registry.is_enabled("ray")
    assert registry.resolve("python").id == "python"
    assert [e.id for e in registry.entries] == ["python", "shell", "ray"]


async def test_unknown_enabled_id_is_an_error_listing_the_registered() -> None:
    with pytest.raises(PluginError) as caught:
        await loaded(entry("python", "python"), enabled=["python", "sprak"])
    assert "sprak" in str(caught.value)
    assert "['python']" in str(caught.value)


async def test_no_enabled_list_loads_everything() -> None:
    registry = await loaded(entry("a", "x"), entry("b", "y"))
    assert sorted(registry.plugins) == ["a", "b"]


# --- entry points ----------------------------------------------------------------------------


@dataclass
class FakeEntryPoint:
    name: str
    value: str
    target: Callable[[], Any] | Any
    loads: list[str] = field(default_factory=list)

    def load(self) -> Any:
        self.loads.append(self.name)
        if isinstance(self.target, BaseException):
            raise self.target
        return self.target


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, points: list[FakeEntryPoint]) -> list[str]:
    groups: list[str] = []

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        groups.append(group)
        return points

    monkeypatch.setattr(registry_module, "entry_points", entry_points)
    return groups


def test_discover_entry_points_accepts_entries_and_callables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    single = entry("third", "third")
    listed = [entry("one", "one"), entry("two", "two")]
    groups = fake_entry_points(
        monkeypatch,
        [
            FakeEntryPoint("third", "pkg.plugins:ENTRY", single),
            FakeEntryPoint("many", "pkg.plugins:entries", lambda: listed),
            FakeEntryPoint("made", "pkg.plugins:make", lambda: entry("made", "made")),
        ],
    )
    found = discover_entry_points()
    assert groups == [ENTRY_POINT_GROUP] == ["sluice.plugins"]
    assert [e.id for e in found] == ["third", "one", "two", "made"]
    assert found[0] is single


def test_a_broken_entry_point_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_entry_points(
        monkeypatch,
        [FakeEntryPoint("broken", "pkg.broken:ENTRY", ImportError("No module named 'pkg'"))],
    )
    with pytest.raises(PluginError) as caught:
        discover_entry_points()
    assert "'broken'" in str(caught.value)
    assert "pkg.broken:ENTRY" in str(caught.value)
    assert "No module named 'pkg'" in str(caught.value)


def test_an_entry_point_whose_factory_fails_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def factory() -> PluginEntry:
        raise RuntimeError("factory bug")

    fake_entry_points(monkeypatch, [FakeEntryPoint("faulty", "pkg:factory", factory)])
    with pytest.raises(PluginError, match=r"'faulty'.*factory bug"):
        discover_entry_points()


@pytest.mark.parametrize(
    "target",
    [42, lambda: "not an entry", lambda: [entry("ok", "ok"), None]],
    ids=["value", "factory", "list"],
)
def test_an_entry_point_giving_something_else_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, target: Any
) -> None:
    fake_entry_points(monkeypatch, [FakeEntryPoint("odd", "pkg.odd:THING", target)])
    with pytest.raises(PluginError) as caught:
        discover_entry_points()
    assert "'odd'" in str(caught.value)


def test_discovery_of_no_entry_points_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_entry_points(monkeypatch, [])
    assert discover_entry_points() == []


async def test_discovered_entries_load_in_a_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_entry_points(monkeypatch, [FakeEntryPoint("x", "pkg:X", entry("ext", "ext"))])
    registry = await loaded(entry("python", "python"), *discover_entry_points())
    assert registry.resolve("ext").id == "ext"
