"""The engine's long-lived connection to a Ray cluster for the task mode: `ray.init` in the
engine process (once, in a thread: it blocks ~1-2 s), then every call to the cluster is an
awaited ObjectRef on the engine's own event loop, no thread per call.

`ray.init` connects a process to one cluster: task-mode tasks of one engine share one GCS
address, and a second address is refused naming both. A connection this process already had
(a program that called ray.init before running sluice in it) is used as it is and left open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from sluice.plugins.ray.cluster import LOOPBACK_ENV
from sluice.plugins.ray.jobs import RayClusterError

CALL_TIMEOUT = 60.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
log = logging.getLogger(__name__)


class RayDriver:
    """This process's connection to one cluster and the task hosts (actors) it has asked for."""

    def __init__(self) -> None:
        self._address: str | None = None
        self._owned = False
        self._hosts: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    async def host(self, gcs_address: str, name: str) -> Any:
        """The handle of the task host `name` on the cluster at `gcs_address` (connecting,
        and creating the actor, on first use)."""
        async with self._lock:
            await self._connect(gcs_address)
            handle = self._hosts.get(name)
            if handle is None:
                handle = await self._in_thread(_get_host, name)
                self._hosts[name] = handle
            return handle

    def forget_host(self, name: str) -> None:
        """Ask for the actor again next time (it died: get-if-exists makes a new one)."""
        self._hosts.pop(name, None)

    async def _connect(self, address: str) -> None:
        if self._address == address:
            return
        if self._address is not None:
            raise RayClusterError(
                f"this engine is connected to the Ray cluster at {self._address}; a task mode "
                f"task cannot also use {address} (one cluster per engine process)"
            )
        self._owned = await self._in_thread(_init, address)
        self._address = address

    @staticmethod
    async def _in_thread(function: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(function, *args)
        except RayClusterError:
            raise
        except Exception as exc:
            raise RayClusterError(f"Ray cluster at {args[0]}: {exc}") from exc

    async def call(self, name: str, ref: Any) -> Any:
        """Await a call to the actor `name` (an ObjectRef); RayClusterError if it fails or
        takes longer than CALL_TIMEOUT."""
        import ray

        try:
            return await asyncio.wait_for(ref, CALL_TIMEOUT)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as exc:
            self.forget_host(name)
            raise RayClusterError(f"the Ray task host {name!r} died: {exc}") from exc
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise RayClusterError(f"the Ray task host {name!r}: {exc!r}") from exc

    async def close(self) -> None:
        """Disconnect, if this driver connected."""
        self._hosts.clear()
        if self._owned:
            import ray

            await asyncio.to_thread(ray.shutdown)
        self._address, self._owned = None, False


def _init(address: str) -> bool:
    """Connect this process to `address` (host:port of the GCS); False if it already was."""
    host = urlsplit(f"//{address}").hostname or ""
    if host in LOOPBACK_HOSTS:
        # Keep this driver's traffic on loopback: without these Ray swaps 127.0.0.1 for the
        # host's external address (cluster.LOOPBACK_ENV, what the local nodes run with). Ray
        # reads them when it is first imported: set before.
        switch = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
        if "ray" in sys.modules and os.environ.get(switch) != LOOPBACK_ENV[switch]:
            raise RayClusterError(  # a clear error, not a driver that hangs dialling away
                f"Ray was imported in this process before it connected to {address}, without "
                f"{switch}={LOOPBACK_ENV[switch]}: it would dial the host's external address; "
                "set it in the engine's environment"
            )
        for name, value in LOOPBACK_ENV.items():
            os.environ.setdefault(name, value)
    import ray

    from sluice.plugins.ray.host import NAMESPACE

    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if current != address:
            raise RayClusterError(
                f"this process is already connected to the Ray cluster at {current}, not {address}"
            )
        return False
    options: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False}
    if host in LOOPBACK_HOSTS:
        options["_node_ip_address"] = "127.0.0.1"
    ray.init(address=address, logging_level=logging.WARNING, **options)
    return True


def _get_host(name: str) -> Any:
    from sluice.plugins.ray.host import get_host

    return get_host(name)
