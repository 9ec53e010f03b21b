"""Request metrics (count and latency by route template, on the runtime's registry), one
DEBUG access-log line per request, and the /metrics page."""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluice.http.problems import Forbidden

access_log = logging.getLogger("sluice.http.access")
_UNMATCHED = "unmatched"


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "sluice_http_requests",
            "HTTP requests served, by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "sluice_http_request_duration_seconds",
            "Seconds from a request's arrival to its response's end, by method and route",
            ["method", "route"],
            registry=registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)


class _Observed:
    """Pure ASGI (not BaseHTTPMiddleware), so streamed responses pass through untouched."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before it responds

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._record(scope, status, time.perf_counter() - started)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        route = _route_template(scope)
        self.metrics.observe(scope["method"], route, status, seconds)
        access_log.debug(
            "%s %s %d %.1fms", scope["method"], scope.get("path", ""), status, seconds * 1000
        )


def _route_template(scope: Scope) -> str:
    """`/api/v1/executions/{execution_id}`, not the id: bounded label values."""
    route: Any = scope.get("route")
    return str(getattr(route, "path", _UNMATCHED))


def observe_requests(app: FastAPI, metrics: RequestMetrics) -> None:
    app.add_middleware(_Observed, metrics=metrics)


def prometheus_route(registry: CollectorRegistry) -> Any:
    async def metrics_page(request: Request) -> Response:
        caller = await request.app.state.authorize(request)
        if caller.projects is not None:  # metrics name every project's quotas and locks
            raise Forbidden(
                "metrics are the whole deployment's: read them unscoped (on loopback, or "
                "from `sluice serve --metrics-port`), not with a project's token"
            )
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics_page
