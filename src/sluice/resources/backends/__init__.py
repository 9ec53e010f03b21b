"""Storage backends of the resource manager, chosen from a URL through `from_url`.

| scheme | backend | shared across processes |
|---|---|---|
| `memory://` | MemoryBackend | no |
| `sqlite:///path`, `postgresql://…` | SqlBackend (the store's tables) | yes |
| `redis://…`, `rediss://…` | RedisBackend (Lua scripts) | yes |

Optional drivers are imported only when their scheme is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sluice.errors import ConfigError
from sluice.resources.backends.base import ResourceBackend

if TYPE_CHECKING:
    from sluice.store.database import Database
    from sluice.store.notify import Notifier


def _memory(url: str, key_prefix: str) -> ResourceBackend:
    from sluice.resources.backends.memory import MemoryBackend

    return MemoryBackend()


def _sql(url: str, key_prefix: str) -> ResourceBackend:
    from sluice.resources.backends.sql import SqlBackend

    return SqlBackend(url=url)


def _redis(url: str, key_prefix: str) -> ResourceBackend:
    from sluice.resources.backends.redis import RedisBackend

    return RedisBackend(url, key_prefix=key_prefix)


_BACKENDS: dict[str, Callable[[str, str], ResourceBackend]] = {
    "memory": _memory,
    "sqlite": _sql,
    "postgresql": _sql,
    "postgres": _sql,
    "redis": _redis,
    "rediss": _redis,
}


def from_url(
    url: str | None,
    *,
    key_prefix: str = "sluice",
    store_db: Database | None = None,
    notifier: Notifier | None = None,
) -> ResourceBackend:
    """The backend for `url`; None means the store's own database (`store_db`).

    The backend is not connected yet: the policy calls `open()` when it starts.
    """
    if url is None:
        if store_db is None:
            raise ConfigError("resources.url is not set and there is no store database to use")
        from sluice.resources.backends.sql import SqlBackend

        return SqlBackend(db=store_db, notifier=notifier)
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _BACKENDS:
        raise ConfigError(
            f"resources.url: unknown scheme {scheme!r} in {url!r}; "
            f"expected one of {', '.join(sorted(_BACKENDS))}"
        )
    return _BACKENDS[scheme](url, key_prefix)


__all__ = ["ResourceBackend", "from_url"]
