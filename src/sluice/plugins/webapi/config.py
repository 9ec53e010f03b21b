"""Configuration of a web-API plugin: quotas, read and write rate limits, the status cache.

Defaults and accepted ranges are Flyte's (flyte-upstream.md 1.7-1.8). The plugin supplies its
defaults through `AsyncPlugin.config`; operators override any of them with the plugin's section
of the engine config (`plugins.config.<plugin id>`), which wins. Every range is checked when
the plugin loads, and a bad value raises InvalidPluginConfigError naming the key and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sluice.errors import InvalidPluginConfigError

# Flyte's validation ranges (core.go constants); seconds for the resync interval.
CACHE_SIZE_RANGE = (10, 500_000)
WORKERS_RANGE = (1, 10_000)
RESYNC_INTERVAL_RANGE = (5.0, 3600.0)
BURST_RANGE = (5, 10_000)
QPS_RANGE = (1.0, 100_000.0)


@dataclass(frozen=True)
class RateLimiterConfig:
    """A token bucket: `qps` tokens a second, at most `burst` saved up."""

    qps: float
    burst: int


@dataclass(frozen=True)
class CachingConfig:
    """The auto-refresh cache that polls remote resources in the background."""

    size: int = 100_000
    """Most resources tracked at once (least recently used ones are dropped and re-seeded)."""
    resync_interval: float = 30.0
    """Seconds between two polls of a resource."""
    workers: int = 10
    """Polls in progress at once."""
    max_system_failures: int = 5
    """Consecutive failed polls tolerated; the next one fails the task (as Flyte)."""


@dataclass(frozen=True)
class PluginConfig:
    """Everything the web-API machinery needs to know about one plugin."""

    resource_quotas: Mapping[str, int] = field(default_factory=dict)
    """Quota per resource namespace, registered at load; empty: no tokens are claimed."""
    read_rate_limiter: RateLimiterConfig = RateLimiterConfig(qps=30.0, burst=300)
    """Applied to every `get`."""
    write_rate_limiter: RateLimiterConfig = RateLimiterConfig(qps=20.0, burst=200)
    """Applied to every `create`, `delete` and `do`."""
    caching: CachingConfig = CachingConfig()

    def __post_init__(self) -> None:
        for name, quota in self.resource_quotas.items():
            _check_int(f"resource_quotas.{name}", quota, 1, None)
        for name in ("read_rate_limiter", "write_rate_limiter"):
            limiter: RateLimiterConfig = getattr(self, name)
            _check_float(f"{name}.qps", limiter.qps, *QPS_RANGE)
            _check_int(f"{name}.burst", limiter.burst, *BURST_RANGE)
        _check_int("caching.size", self.caching.size, *CACHE_SIZE_RANGE)
        _check_float(
            "caching.resync_interval", self.caching.resync_interval, *RESYNC_INTERVAL_RANGE
        )
        _check_int("caching.workers", self.caching.workers, *WORKERS_RANGE)
        _check_int("caching.max_system_failures", self.caching.max_system_failures, 0, None)

    def with_overrides(self, overrides: Mapping[str, Any]) -> PluginConfig:
        """This config with `overrides` (a config section, nested as the fields) applied."""
        _check_keys("", overrides, {f.name for f in fields(self)})
        quotas = overrides.get("resource_quotas")
        if quotas is not None and not isinstance(quotas, Mapping):
            raise InvalidPluginConfigError(f"resource_quotas must be a table, got {quotas!r}")
        return PluginConfig(
            resource_quotas=dict(quotas) if quotas is not None else dict(self.resource_quotas),
            read_rate_limiter=_merge("read_rate_limiter", self.read_rate_limiter, overrides),
            write_rate_limiter=_merge("write_rate_limiter", self.write_rate_limiter, overrides),
            caching=_merge("caching", self.caching, overrides),
        )


MACHINERY_KEYS = frozenset(f.name for f in fields(PluginConfig))
"""Top-level keys of a plugin's config section that belong to the web-API machinery."""


def _merge(name: str, base: Any, overrides: Mapping[str, Any]) -> Any:
    section = overrides.get(name)
    if section is None:
        return base
    if not isinstance(section, Mapping):
        raise InvalidPluginConfigError(f"{name} must be a table, got {section!r}")
    _check_keys(f"{name}.", section, {f.name for f in fields(base)})
    return replace(base, **section)


def _check_keys(prefix: str, given: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidPluginConfigError(
            f"unknown config key {prefix}{unknown[0]}; expected one of {sorted(known)}"
        )


def _check_int(key: str, value: object, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPluginConfigError(f"{key} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        expected = f">= {low}" if high is None else f"between {low} and {high}"
        raise InvalidPluginConfigError(f"{key} must be {expected}, got {value!r}")


def _check_float(key: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidPluginConfigError(f"{key} must be a number, got {value!r}")
    if not low <= value <= high:
        raise InvalidPluginConfigError(f"{key} must be between {low:g} and {high:g}, got {value!r}")
