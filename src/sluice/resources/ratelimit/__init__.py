"""Keyed rate limits beside quotas (docs/resources.md, "Rate limits").

The storage seam is `sluice.resources.backends.ratelimit_base.RateLimitBackend`.

`RateLimits` is the policy; `from_url` picks where the GCRA state is kept (memory, SQLite,
PostgreSQL, Redis), like the quotas' backends: the store's database when no URL is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sluice.errors import ConfigError
from sluice.resources.ratelimit.models import (
    Admission,
    Asker,
    KeySnapshot,
    LimitSnapshot,
    RateClaim,
    RateLimitRegistrar,
    RateWaiter,
)
from sluice.resources.ratelimit.policy import RateLimits
from sluice.spec.rates import RateLimitRule

if TYPE_CHECKING:
    from sluice.clock import Clock
    from sluice.config import ResourcesConfig
    from sluice.resources.backends.ratelimit_base import RateLimitBackend
    from sluice.store.database import Database


def _memory(url: str, key_prefix: str) -> RateLimitBackend:
    from sluice.resources.backends.ratelimit_memory import MemoryRateLimits

    return MemoryRateLimits()


def _sql(url: str, key_prefix: str) -> RateLimitBackend:
    from sluice.resources.backends.ratelimit_sql import SqlRateLimits

    return SqlRateLimits(url=url)


def _redis(url: str, key_prefix: str) -> RateLimitBackend:
    from sluice.resources.backends.ratelimit_redis import RedisRateLimits

    return RedisRateLimits(url, key_prefix=key_prefix)


_BACKENDS: dict[str, Callable[[str, str], RateLimitBackend]] = {
    "memory": _memory,
    "sqlite": _sql,
    "postgresql": _sql,
    "postgres": _sql,
    "redis": _redis,
    "rediss": _redis,
}


def from_url(
    url: str | None, *, key_prefix: str = "sluice", store_db: Database | None = None
) -> RateLimitBackend:
    """The backend for `url` (resources.url); None means the store's own database."""
    if url is None:
        if store_db is None:
            raise ConfigError("resources.url is not set and there is no store database to use")
        from sluice.resources.backends.ratelimit_sql import SqlRateLimits

        return SqlRateLimits(db=store_db)
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _BACKENDS:
        raise ConfigError(
            f"resources.url: unknown scheme {scheme!r} in {url!r}; "
            f"expected one of {', '.join(sorted(_BACKENDS))}"
        )
    return _BACKENDS[scheme](url, key_prefix)


def from_config(
    config: ResourcesConfig, *, store_db: Database | None, clock: Clock | None
) -> RateLimits:
    """The rate limits of `config.url` (the store's database without one), with the
    configured rules; `clock` None judges on the store's clock."""
    rules = {name: RateLimitRule.parse(rate) for name, rate in config.rate_limits.items()}
    backend = from_url(config.url, key_prefix=config.key_prefix, store_db=store_db)
    return RateLimits(backend, clock=clock, config_rules=rules)


__all__ = [
    "Admission",
    "Asker",
    "KeySnapshot",
    "LimitSnapshot",
    "RateClaim",
    "RateLimitRegistrar",
    "RateLimitRule",
    "RateLimits",
    "RateWaiter",
    "from_config",
    "from_url",
]
