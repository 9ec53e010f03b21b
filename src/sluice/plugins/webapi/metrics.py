"""Prometheus metrics of one web-API plugin, on the registry its SetupContext gives it.

Names carry the plugin id (as Flyte scopes them per plugin), so several web-API plugins can
share one registry: `sluice_webapi_<plugin>_allocation_grant_success_total`, ...
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Summary


class WebApiMetrics:
    def __init__(self, registry: CollectorRegistry, plugin_id: str) -> None:
        self.registry = registry
        self.prefix = prefix = "sluice_webapi_" + re.sub(r"[^a-zA-Z0-9_]", "_", plugin_id)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"{prefix}_{name}", doc, labels, registry=registry)

        self.allocation_grant_success = counter(
            "allocation_grant_success", "Allocation tokens granted"
        )
        self.allocation_grant_failed = counter(
            "allocation_grant_failed", "Allocation requests refused", ("status",)
        )
        self.resource_wait_time = Summary(
            f"{prefix}_resource_wait_time_seconds",
            "Seconds from a task's first allocation request to its grant",
            registry=registry,
        )
        self.resource_release_success = counter(
            "resource_release_success", "Allocation tokens released"
        )
        self.resource_release_failed = counter(
            "resource_release_failed", "Allocation token releases that raised"
        )
        self.calls = counter("calls", "Calls to the remote service", ("operation",))
        self.call_failures = counter(
            "call_failures", "Calls to the remote service that failed", ("operation",)
        )
        self.throttled = counter(
            "throttled", "Calls the remote service asked to retry later", ("operation",)
        )
