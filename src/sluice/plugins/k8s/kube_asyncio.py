"""KubeClient on kubernetes_asyncio, the official async client (`pip install 'sluice[kubernetes]'`).

Uses its DynamicClient, so any kind the cluster serves (Pods, CRDs) works with dict bodies;
patches are JSON merge patches. Driver exceptions are translated here, once, into
`sluice.plugins.k8s.errors`. This module has not been run against a real cluster: its tests
drive it over HTTP against an emulation of the API server (tests/plugins/k8s/apiserver.py).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

from sluice.errors import MissingDependencyError
from sluice.plugins.k8s.errors import KubeApiError, KubeInvalidError, translate_status
from sluice.plugins.k8s.objects import KindRef, Manifest, ObjectList, ObjectRef, WatchEvent, meta

MISSING_DRIVER = "the Kubernetes plugins need kubernetes_asyncio: pip install 'sluice[kubernetes]'"
MERGE_PATCH = "application/merge-patch+json"
_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


def driver_missing() -> str | None:
    """MISSING_DRIVER when kubernetes_asyncio cannot be imported, else None. Looks the
    package up without importing it, so loading a plugin stays cheap."""
    try:
        found = importlib.util.find_spec("kubernetes_asyncio") is not None
    except (ImportError, ValueError):  # a finder refusing it, or a None in sys.modules
        found = False
    return None if found else MISSING_DRIVER


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependencyError(MISSING_DRIVER) from exc


def translate_exception(exc: BaseException) -> KubeApiError | None:
    """The sluice error for a kubernetes_asyncio or transport exception; None for others
    (bugs, cancellation), which must propagate as they are."""
    if isinstance(exc, KubeApiError):
        return exc
    status = getattr(exc, "status", None)
    if isinstance(status, int) and hasattr(exc, "reason"):
        return translate_status(status, getattr(exc, "body", None), str(exc.reason or ""))
    if type(exc).__name__ == "ResourceNotFoundError":  # discovery: the cluster lacks the kind
        return KubeInvalidError(f"the cluster does not serve this kind: {exc}", 404, "NotFound")
    if isinstance(exc, OSError) or _is_transport_error(exc):
        return KubeApiError(f"cannot reach the Kubernetes API: {exc!r}")
    return None


def _is_transport_error(exc: BaseException) -> bool:
    return any(cls.__module__.startswith("aiohttp") for cls in type(exc).__mro__)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        error = translate_exception(exc)
        if error is None or error is exc:
            raise
        raise error from exc


class KubernetesAsyncioClient:
    """A KubeClient over a kubernetes_asyncio DynamicClient (or anything shaped like one).

    Every call asks for the raw response (`serialize=False`) and checks its status here: the
    DynamicClient streams responses and so never raises on an HTTP error status itself; it
    would hand back the error `Status` as if it were the object.
    """

    def __init__(self, dynamic: Any, api_client: Any = None) -> None:
        self._dynamic = dynamic
        self._api_client = api_client
        self._resources: dict[KindRef, Any] = {}

    async def _resource(self, kind: KindRef) -> Any:
        if kind not in self._resources:
            with translated():
                self._resources[kind] = await self._dynamic.resources.get(
                    api_version=kind.api_version, kind=kind.kind
                )
        return self._resources[kind]

    async def _send(self, call: Awaitable[Any]) -> Manifest:
        """The JSON body of a raw response; the translated error for a non-2xx status."""
        with translated():
            response = await call
            try:
                body = await response.read()
            finally:
                response.release()
        if not 200 <= response.status <= 299:
            raise translate_status(response.status, body, str(response.reason or ""))
        data = json.loads(body) if body else {}
        return data if isinstance(data, dict) else {}

    async def create(self, manifest: Manifest) -> Manifest:
        resource = await self._resource(KindRef(manifest["apiVersion"], manifest["kind"]))
        namespace = meta(manifest).get("namespace")
        call = self._dynamic.create(resource, body=manifest, namespace=namespace, serialize=False)
        return await self._send(call)

    async def get(self, ref: ObjectRef) -> Manifest:
        resource = await self._resource(ref.kind_ref)
        call = self._dynamic.get(resource, name=ref.name, namespace=ref.namespace, serialize=False)
        return await self._send(call)

    async def delete(self, ref: ObjectRef) -> None:
        resource = await self._resource(ref.kind_ref)
        await self._send(
            self._dynamic.delete(resource, name=ref.name, namespace=ref.namespace, serialize=False)
        )

    async def patch(self, ref: ObjectRef, patch: Manifest) -> Manifest:
        resource = await self._resource(ref.kind_ref)
        call = self._dynamic.patch(
            resource,
            body=patch,
            name=ref.name,
            namespace=ref.namespace,
            content_type=MERGE_PATCH,
            serialize=False,
        )
        return await self._send(call)

    async def update(self, manifest: Manifest) -> Manifest:
        resource = await self._resource(KindRef(manifest["apiVersion"], manifest["kind"]))
        namespace = meta(manifest).get("namespace")
        call = self._dynamic.replace(resource, body=manifest, namespace=namespace, serialize=False)
        return await self._send(call)

    async def list_objects(
        self, kind: KindRef, namespace: str, label_selector: str = ""
    ) -> ObjectList:
        resource = await self._resource(kind)
        selector = label_selector or None
        data = await self._send(
            self._dynamic.get(
                resource, namespace=namespace, label_selector=selector, serialize=False
            )
        )
        # list items come without apiVersion and kind; put them back so they are manifests
        items = [
            {"apiVersion": kind.api_version, "kind": kind.kind, **item}
            for item in data.get("items") or []
        ]
        return ObjectList(items, str(meta(data).get("resourceVersion", "")))

    async def watch(
        self, kind: KindRef, namespace: str, label_selector: str = "", resource_version: str = ""
    ) -> AsyncIterator[WatchEvent]:
        resource = await self._resource(kind)
        watcher = _module("kubernetes_asyncio.watch").Watch()
        try:
            with translated():
                async for raw in self._dynamic.watch(
                    resource,
                    namespace=namespace,
                    label_selector=label_selector or None,
                    resource_version=resource_version or None,
                    watcher=watcher,
                ):
                    if raw.get("type") in _EVENT_TYPES:
                        yield WatchEvent(raw["type"], dict(raw["raw_object"]))
        finally:
            await watcher.close()

    async def close(self) -> None:
        if self._api_client is not None:
            await self._api_client.close()


async def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
    discovery_cache: str | None = None,
) -> KubernetesAsyncioClient:
    """A client from a kubeconfig file, or from the pod's service account when `in_cluster`
    (None: in cluster when running in a pod and no kubeconfig is given). Discovery talks to
    the API server, so this fails (KubeApiError) when the cluster cannot be reached; its
    result is cached in `discovery_cache` (default: a file in the temp directory)."""
    dynamic_module = _module("kubernetes_asyncio.dynamic")
    if in_cluster is None:
        in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    api_client = await _api_client(kubeconfig, context, in_cluster)
    try:
        with translated():
            dynamic = await dynamic_module.DynamicClient(api_client, cache_file=discovery_cache)
    except BaseException:
        await api_client.close()
        raise
    return KubernetesAsyncioClient(dynamic, api_client)


async def _api_client(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    config, client = _module("kubernetes_asyncio.config"), _module("kubernetes_asyncio.client")
    try:
        if in_cluster:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration=configuration)
        return await config.new_client_from_config(config_file=kubeconfig, context=context)
    except config.ConfigException as exc:
        raise KubeApiError(f"cannot load the Kubernetes configuration: {exc}") from exc
