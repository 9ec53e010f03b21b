"""Web-API plugins: tasks that drive a job on a remote service (Flyte's webapi machinery).

A plugin implements `AsyncPlugin` (create, get, delete, status) or `SyncPlugin` (do) and is
registered with `webapi_entry(...)`; the adapters run the state machine, the quota token, the
rate limiters and the background polling.
"""

from sluice.plugins.webapi.adapter import AsyncPluginAdapter
from sluice.plugins.webapi.cache import CacheItem, ResourceCache
from sluice.plugins.webapi.config import CachingConfig, PluginConfig, RateLimiterConfig
from sluice.plugins.webapi.entry import load_webapi_plugin, webapi_entry
from sluice.plugins.webapi.interfaces import (
    AsyncPlugin,
    DeleteContext,
    GetContext,
    PermanentError,
    Resource,
    ResourceMeta,
    ResourceVanishedError,
    RetryLater,
    StatusContext,
    SyncPlugin,
    WebApiSignal,
)
from sluice.plugins.webapi.ratelimit import RateLimiter
from sluice.plugins.webapi.state import State, WebApiPhase
from sluice.plugins.webapi.sync import SyncPluginAdapter

__all__ = [
    "AsyncPlugin",
    "AsyncPluginAdapter",
    "CacheItem",
    "CachingConfig",
    "DeleteContext",
    "GetContext",
    "PermanentError",
    "PluginConfig",
    "RateLimiter",
    "RateLimiterConfig",
    "Resource",
    "ResourceCache",
    "ResourceMeta",
    "ResourceVanishedError",
    "RetryLater",
    "State",
    "StatusContext",
    "SyncPlugin",
    "SyncPluginAdapter",
    "WebApiPhase",
    "WebApiSignal",
    "load_webapi_plugin",
    "webapi_entry",
]
