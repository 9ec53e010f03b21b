"""PluginConfig: upstream's defaults and ranges, overrides from the engine config, and errors
that name the key and the value."""

from __future__ import annotations

from typing import Any

import pytest
from tests.plugins.webapi.fakes import ScriptedRemote, load_entry

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.builtin.http_job import ENTRY as HTTP_JOB
from sluice.plugins.core.registry import PluginRegistry
from sluice.plugins.testing import setup_context
from sluice.plugins.webapi import (
    AsyncPluginAdapter,
    CachingConfig,
    PluginConfig,
    RateLimiterConfig,
    SyncPluginAdapter,
    webapi_entry,
)


def test_defaults_are_upstreams() -> None:
    config = PluginConfig()
    assert config.caching == CachingConfig(100_000, 30.0, 10, 5)
    assert config.read_rate_limiter == RateLimiterConfig(qps=30.0, burst=300)
    assert config.write_rate_limiter == RateLimiterConfig(qps=20.0, burst=200)
    assert dict(config.resource_quotas) == {}


def test_overrides_merge_nested_sections() -> None:
    config = PluginConfig(resource_quotas={"a": 3}).with_overrides(
        {"caching": {"workers": 4}, "read_rate_limiter": {"qps": 100}}
    )
    assert config.caching == CachingConfig(workers=4)
    assert config.read_rate_limiter == RateLimiterConfig(qps=100, burst=300)
    assert dict(config.resource_quotas) == {"a": 3}
    replaced = config.with_overrides({"resource_quotas": {"b": 7}})
    assert dict(replaced.resource_quotas) == {"b": 7}


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (
            {"read_rate_limiter": {"qps": 0}},
            "read_rate_limiter.qps must be between 1 and 100000, got 0",
        ),
        ({"write_rate_limiter": {"qps": 100_001}}, "write_rate_limiter.qps"),
        (
            {"write_rate_limiter": {"burst": 4}},
            "write_rate_limiter.burst must be between 5 and 10000, got 4",
        ),
        ({"caching": {"workers": 0}}, "caching.workers must be between 1 and 10000, got 0"),
        ({"caching": {"size": 9}}, "caching.size must be between 10 and 500000, got 9"),
        ({"caching": {"size": 500_001}}, "caching.size must be between 10 and 500000, got 500001"),
        (
            {"caching": {"resync_interval": 4.5}},
            "caching.resync_interval must be between 5 and 3600, got 4.5",
        ),
        ({"caching": {"resync_interval": 3601}}, "caching.resync_interval"),
        ({"caching": {"workers": True}}, "caching.workers must be an integer, got True"),
        (
            {"caching": {"max_system_failures": -1}},
            "caching.max_system_failures must be >= 0, got -1",
        ),
        ({"caching": {"wokers": 3}}, "unknown config key caching.wokers"),
        ({"resource_quotas": {"hive": 0}}, "resource_quotas.hive must be >= 1, got 0"),
        ({"read_rate_limiter": 5}, "read_rate_limiter must be a table, got 5"),
    ],
)
def test_out_of_range_values_name_the_key_and_value(overrides: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidPluginConfigError) as caught:
        PluginConfig().with_overrides(overrides)
    assert named in str(caught.value)


def test_boundaries_are_accepted() -> None:
    PluginConfig(
        read_rate_limiter=RateLimiterConfig(qps=1, burst=5),
        write_rate_limiter=RateLimiterConfig(qps=100_000, burst=10_000),
        caching=CachingConfig(size=10, resync_interval=5, workers=1, max_system_failures=0),
    )
    PluginConfig(caching=CachingConfig(size=500_000, resync_interval=3600, workers=10_000))


async def test_a_bad_section_fails_the_load_naming_plugin_key_and_value() -> None:
    entry = webapi_entry("remote", ("remote",), lambda setup: ScriptedRemote())
    setup, _ = setup_context("remote", {"caching": {"workers": 0}})
    with pytest.raises(
        InvalidPluginConfigError, match=r"plugins\.config\.remote: caching\.workers .* got 0"
    ):
        await load_entry(entry, setup)


async def test_an_unknown_top_level_key_fails_the_load() -> None:
    setup, _ = setup_context("http_job", {"timeout": 5, "cachng": {}})
    with pytest.raises(InvalidPluginConfigError, match=r"plugins\.config\.http_job\.cachng"):
        await load_entry(HTTP_JOB, setup)


async def test_http_job_own_keys_are_checked_too() -> None:
    setup, _ = setup_context("http_job", {"timeout": 0})
    with pytest.raises(InvalidPluginConfigError, match="timeout must be a number > 0, got 0"):
        await load_entry(HTTP_JOB, setup)


async def test_a_bad_config_through_the_registry_is_still_named() -> None:
    registry = PluginRegistry([HTTP_JOB])
    with pytest.raises(InvalidPluginConfigError, match=r"read_rate_limiter\.qps"):
        await registry.load(
            lambda entry: setup_context(entry.id, {"read_rate_limiter": {"qps": 0}})[0]
        )


async def test_quotas_are_registered_at_load_with_overrides_winning() -> None:
    setup, registrar = setup_context("http_job", {"resource_quotas": {"default": 50, "hive": 2}})
    plugin = await load_entry(HTTP_JOB, setup)
    assert registrar.quotas == {"default": 50, "hive": 2}
    assert isinstance(plugin, AsyncPluginAdapter)
    await plugin.close()


async def test_a_sync_plugin_gets_the_sync_adapter() -> None:
    class Echo:
        config = PluginConfig()

        async def resource_requirements(self, ctx: Any) -> tuple[str, None]:
            return "default", None

        async def do(self, ctx: Any) -> Any:
            raise NotImplementedError

    entry = webapi_entry("echo", ("echo",), lambda setup: Echo())
    plugin = await load_entry(entry, setup_context("echo")[0])
    assert isinstance(plugin, SyncPluginAdapter)
