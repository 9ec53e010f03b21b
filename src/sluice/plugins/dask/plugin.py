"""The `dask` plugin: a python function task runs on a `distributed` cluster (see the
package docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import uuid
from typing import Any

from sluice.errors import PluginUnavailableError
from sluice.plugins.answers import answer_phase, job_payload, no_source
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginProperties
from sluice.plugins.dask.cluster import LocalDaskCluster
from sluice.plugins.dask.config import DaskJobConfig, DaskPluginConfig, parse_job_config
from sluice.plugins.dask.remote import run_captured
from sluice.spec.models import TaskSpec

PLUGIN_ID = "dask"
STATE_VERSION = 1
INSTALL_HINT = "the Dask plugin needs distributed: pip install 'sluice[dask]'"
log = logging.getLogger(__name__)


def task_key(ctx: TaskExecutionContext) -> str:
    """The task's key on the scheduler: one per (execution, node, attempt), so a restarted
    engine finds the published task instead of submitting it again."""
    return "sluice-" + ctx.metadata.generated_name(max_length=100)


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise PluginUnavailableError(f"{INSTALL_HINT} ({exc})") from None
    return distributed


class DaskPlugin:
    def __init__(self, config: DaskPluginConfig) -> None:
        self._config = config
        self._instance = uuid.uuid4().hex  # tells this engine's local clusters from a dead one's
        self._clients: dict[str, Any] = {}
        self._connecting: dict[str, asyncio.Task[None]] = {}
        self._connect_errors: dict[str, str] = {}
        self._clusters: dict[tuple[int, int], LocalDaskCluster] = {}
        self._futures: dict[str, Any] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    @property
    def id(self) -> str:
        return PLUGIN_ID

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    @property
    def unavailable(self) -> str | None:
        return None if importlib.util.find_spec("distributed") else INSTALL_HINT

    def validate_task(self, task: TaskSpec) -> None:
        parse_job_config(task.custom, task.name)

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        config = parse_job_config(ctx.task.custom, ctx.task.name)
        state = self._state(ctx)
        address = state.get("address") or config.address or self._config.address
        address = address or self._local_cluster(config)
        client = self._clients.get(address)
        if client is None:
            return Transition.to(self._connect(ctx, address))
        key = task_key(ctx)
        future = self._futures.get(key) or await client.get_dataset(key, default=None)
        if future is None:
            return Transition.to(await self._submit(ctx, config, client, address, state))
        self._watch(ctx, key, future)
        if not future.done():
            return Transition.to(PhaseInfo.running(0, f"Dask task {key} on {address}"))
        return Transition.to(await self._finished(ctx, key, future))

    def _state(self, ctx: TaskExecutionContext) -> dict[str, Any]:
        state = ctx.state_reader.get() or {}
        if state.get("owner") not in (None, self._instance):
            # Its cluster was a local one of an engine that is gone, and died with it.
            return {"resubmitted": True}
        return state

    def _local_cluster(self, config: DaskJobConfig) -> str:
        cluster = self._clusters.get(config.local_shape())
        if cluster is None:
            cluster = LocalDaskCluster(config.workers, config.threads)
            cluster.launch()
            self._clusters[config.local_shape()] = cluster
        return cluster.address

    def _connect(self, ctx: TaskExecutionContext, address: str) -> PhaseInfo:
        error = self._connect_errors.pop(address, None)
        if error is not None:
            return PhaseInfo.system_retryable_failure("DaskSchedulerUnreachable", error)
        connecting = self._connecting.get(address)
        if connecting is None:
            connecting = asyncio.create_task(self._open_client(address))
            self._connecting[address] = connecting
        connecting.add_done_callback(lambda _: ctx.refresh())
        return PhaseInfo.initializing(0, f"connecting to the Dask scheduler at {address}")

    async def _open_client(self, address: str) -> None:
        try:
            client = await _distributed().Client(
                address, asynchronous=True, timeout=self._config.start_timeout
            )
            self._clients[address] = client
        except Exception as exc:
            self._connect_errors[address] = f"Dask scheduler at {address}: {exc}"
            await self._drop_cluster(
                address
            )  # a local one that did not start: the retry starts anew
        finally:
            self._connecting.pop(address, None)

    async def _drop_cluster(self, address: str) -> None:
        for shape, cluster in list(self._clusters.items()):
            if cluster.address == address:
                del self._clusters[shape]
                await asyncio.to_thread(cluster.stop)

    async def _submit(
        self,
        ctx: TaskExecutionContext,
        config: DaskJobConfig,
        client: Any,
        address: str,
        state: dict[str, Any],
    ) -> PhaseInfo:
        key = task_key(ctx)
        if state.get("submitted"):
            return PhaseInfo.system_retryable_failure(
                "DaskTaskLost", f"Dask task {key} is no longer known to the scheduler {address}"
            )
        payload = job_payload(ctx, config.flyte, self._config.flyte_data_dir)
        if payload is None:
            return no_source(ctx)
        resources = config.resources or None
        future = client.submit(run_captured, payload, key=key, pure=False, resources=resources)
        # Published, the task outlives this client: a restarted engine gets it by its key.
        await client.publish_dataset(future, name=key)
        self._futures[key] = future
        owned = not (config.address or self._config.address)
        new_state = {"address": address, "submitted": True}
        ctx.state_writer.put(
            STATE_VERSION, new_state | ({"owner": self._instance} if owned else {})
        )
        self._watch(ctx, key, future)
        again = " (again: the engine that ran it is gone)" if state.get("resubmitted") else ""
        return PhaseInfo.queued(0, f"Dask task {key} submitted to {address}{again}")

    def _watch(self, ctx: TaskExecutionContext, key: str, future: Any) -> None:
        self._futures[key] = future
        if key not in self._watchers:
            self._watchers[key] = asyncio.create_task(self._refresh_when_done(ctx, future))

    @staticmethod
    async def _refresh_when_done(ctx: TaskExecutionContext, future: Any) -> None:
        await _distributed().wait([future])
        ctx.refresh()

    async def _finished(self, ctx: TaskExecutionContext, key: str, future: Any) -> PhaseInfo:
        if future.status == "cancelled":
            return PhaseInfo.system_retryable_failure(
                "DaskTaskCancelled", f"Dask task {key} was cancelled outside sluice"
            )
        if future.status != "finished":
            error = await future.exception()
            return PhaseInfo.system_retryable_failure("DaskTaskError", f"{key}: {error!r}")
        result = await future.result()
        for stream in ("stdout", "stderr"):
            if result.get(stream):
                ctx.log_writer.write(result[stream], stream)
        return answer_phase(ctx, result["answer"])

    async def abort(self, ctx: TaskExecutionContext) -> None:
        key, client = task_key(ctx), self._client_of(ctx)
        future = self._futures.get(key)
        if client is not None and future is not None:
            await client.cancel([future], force=True)

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        key, client = task_key(ctx), self._client_of(ctx)
        watcher = self._watchers.pop(key, None)
        if watcher is not None:
            watcher.cancel()
        future = self._futures.pop(key, None)
        if client is None:
            return
        if future is not None and not future.done():  # failed or timed out while running
            await client.cancel([future], force=True)
        with contextlib.suppress(KeyError):  # never published, or already unpublished
            await client.unpublish_dataset(key)

    def _client_of(self, ctx: TaskExecutionContext) -> Any:
        address = self._state(ctx).get("address")
        return self._clients.get(address) if address else None

    async def close(self) -> None:
        for task in [*self._watchers.values(), *self._connecting.values()]:
            task.cancel()
        await asyncio.gather(*self._connecting.values(), return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        clusters, self._clusters = list(self._clusters.values()), {}
        await asyncio.gather(*(asyncio.to_thread(c.stop) for c in clusters))
