"""A Kubernetes API server over HTTP on 127.0.0.1, backed by the in-memory FakeKubeClient.

Enough of the API for kubernetes_asyncio's DynamicClient: discovery (/version, /api, /apis,
/api/v1 with pods and config maps), and create, get, delete, merge patch, replace, list and
watch of namespaced core objects. Failures are answered as the API server does: a `Status`
body with code, reason and message; an expired watch is an ERROR event with code 410. Every
request is recorded, so tests can check what the client sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sluice.plugins.k8s import KindRef, KubeApiError, KubeGoneError, ObjectRef
from sluice.plugins.k8s.testing import FakeKubeClient

KINDS = {"pods": "Pod", "configmaps": "ConfigMap"}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass
class Request:
    method: str
    path: str
    content_type: str
    query: dict[str, str]


@dataclass
class ApiServer:
    kube: FakeKubeClient
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/version", _answer({"major": "1", "minor": "30"}))
        app.router.add_get("/api", _answer({"kind": "APIVersions", "versions": ["v1"]}))
        app.router.add_get("/apis", _answer({"kind": "APIGroupList", "groups": []}))
        app.router.add_get("/api/v1", self._resources)
        app.router.add_route("*", "/api/v1/namespaces/{ns}/{plural}", self._collection)
        app.router.add_route("*", "/api/v1/namespaces/{ns}/{plural}/{name}", self._item)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        }

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type", "")
        self.requests.append(
            Request(request.method, request.path, content_type, dict(request.query))
        )
        try:
            return await handler(request)
        except KubeApiError as error:
            return web.json_response(_status(error), status=error.status or 500)

    async def _resources(self, _: web.Request) -> web.Response:
        resources = [
            {"name": plural, "kind": kind, "namespaced": True, "verbs": VERBS}
            for plural, kind in KINDS.items()
        ]
        return web.json_response(
            {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}
        )

    async def _collection(self, request: web.Request) -> web.StreamResponse:
        kind, namespace = _kind(request), request.match_info["ns"]
        if request.method == "POST":
            return web.json_response(await self.kube.create(await request.json()), status=201)
        selector = request.query.get("labelSelector", "")
        if request.query.get("watch") in ("true", "True", "1"):
            return await self._watch(request, kind, namespace, selector)
        listing = await self.kube.list_objects(kind, namespace, selector)
        return web.json_response(
            {
                "kind": f"{kind.kind}List",
                "items": listing.items,
                "metadata": {"resourceVersion": listing.resource_version},
            }
        )

    async def _item(self, request: web.Request) -> web.Response:
        kind = _kind(request)
        ref = ObjectRef("v1", kind.kind, request.match_info["ns"], request.match_info["name"])
        if request.method == "GET":
            return web.json_response(await self.kube.get(ref))
        if request.method == "DELETE":
            await self.kube.delete(ref)
            return web.json_response({"kind": "Status", "status": "Success"})
        if request.method == "PATCH":
            if request.content_type != "application/merge-patch+json":
                return web.json_response({"message": "patch type"}, status=415)
            return web.json_response(await self.kube.patch(ref, await request.json()))
        return web.json_response(await self.kube.update(await request.json()))

    async def _watch(
        self, request: web.Request, kind: KindRef, namespace: str, selector: str
    ) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        version = request.query.get("resourceVersion", "")
        try:
            async for event in self.kube.watch(kind, namespace, selector, version):
                line = {"type": event.type, "object": event.object}
                await response.write(json.dumps(line).encode() + b"\n")
        except KubeGoneError as error:
            line = {"type": "ERROR", "object": _status(error)}
            await response.write(json.dumps(line).encode() + b"\n")
        return response


def _answer(body: dict[str, Any]) -> Any:
    async def handler(_: web.Request) -> web.Response:
        return web.json_response(body)

    return handler


def _kind(request: web.Request) -> KindRef:
    return KindRef("v1", KINDS[request.match_info["plural"]])


def _status(error: KubeApiError) -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "code": error.status,
        "reason": error.reason,
        "message": error.message,
    }
