"""The composition root: everything one sluice process needs, opened from Settings.

The CLI and the Python API both go through a Runtime, so an embedded `sluice run` and a
distributed `sluice engine` are the same code with different URLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sluice.cache import Catalog
from sluice.clock import Clock, SystemClock
from sluice.config import CacheConfig, ResourcesConfig, Settings
from sluice.engine.admission import NodeAdmission
from sluice.engine.cache_gate import NO_CACHE, CacheGate
from sluice.engine.claims import NO_CLAIMS, ClaimsGate
from sluice.engine.context import EnvSecrets
from sluice.engine.engine import Engine, EngineParts
from sluice.engine.executor import ExecutionDriver
from sluice.engine.metrics import EngineMetrics
from sluice.engine.owned import OwnedExecutions
from sluice.engine.rate_gate import RateLimitedClaims
from sluice.engine.services import EngineServices, NodeCache, NodeClaims
from sluice.errors import NotFoundError, PluginNotFoundError
from sluice.executions.idempotency import (
    IdempotencyKey,
    Launched,
    check_key,
    create_once,
    request_hash,
)
from sluice.executions.launch import check_launch, claim_limits, create_execution, merge_inputs
from sluice.fencing import LeaseFence
from sluice.ids import new_instance_id
from sluice.logs import LogFiles, TaskLogSink, log_store_url
from sluice.logs.reader import LogReader
from sluice.plugins.builtin import builtin_entries
from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import PluginEntry, validate_task
from sluice.plugins.core.registry import PluginRegistry, discover_entry_points
from sluice.resources import QuotaManager, ratelimit
from sluice.resources.ratelimit import RateLimits
from sluice.spec.compound import plugin_tasks
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.store.database import parse_database_url
from sluice.store.notify import Notifier
from sluice.store.records import ExecutionRecord
from sluice.store.store import Store


def resolve_target(target: Any) -> tuple[WorkflowSpec, LaunchPlanSpec | None]:
    """The workflow (and launch plan) behind a @workflow, a LaunchPlan or a @task, or behind
    a flytekit workflow, launch plan or task (translated by sluice.flyte)."""
    from sluice.sdk.launch_plan import LaunchPlan
    from sluice.sdk.task import TaskDef
    from sluice.sdk.workflow import WorkflowDef, task_workflow

    if isinstance(target, LaunchPlan):
        return target.workflow.spec, target.spec
    if isinstance(target, WorkflowDef):
        return target.spec, None
    if isinstance(target, TaskDef):
        return task_workflow(target), None
    from sluice.flyte import is_flytekit_object

    if is_flytekit_object(target):
        from sluice.flyte.resolve import resolve_flytekit

        return resolve_flytekit(target)
    raise NotFoundError(f"{target!r} is not a workflow, launch plan or task")


def compose_engine(
    services: EngineServices,
    store: Store,
    notifier: Notifier | None,
    *,
    only: Iterable[str] | None = None,
    catalog: Catalog | None = None,
    cache_config: CacheConfig | None = None,
    resources: QuotaManager | None = None,
    resources_config: ResourcesConfig | None = None,
    workflows: dict[tuple[str, str, str], WorkflowSpec] | None = None,
    rate_limits: RateLimits | None = None,
) -> Engine:
    """An engine and its parts: admission under the lock rules, the cache gate on `catalog`
    and the claims gate on `resources` (the no-op gates without them), and the driver."""
    owned = OwnedExecutions()
    rules = (resources_config or ResourcesConfig()).lock_rules
    config, clock = services.config, services.clock
    admission = NodeAdmission(config, clock, owned.enqueue, owned.find, resources, rules)
    cache: NodeCache = NO_CACHE
    if catalog is not None:
        cache = CacheGate(catalog, cache_config or CacheConfig(), clock, admission.wait_for_cache)
    claims: NodeClaims = NO_CLAIMS
    if resources is not None:
        claims = ClaimsGate(resources, admission.capacity, admission.wait_for_resources, clock)
    if rate_limits is not None:  # rate limits are taken last, right before the launch
        claims = RateLimitedClaims(claims, rate_limits, admission.wake_at, clock)
    driver = ExecutionDriver(services, admission, store, notifier, cache, claims)
    parts = EngineParts(owned, admission, driver, claims, catalog, resources, workflows)
    return Engine(services, store, notifier, parts, only=only)


class Runtime:
    def __init__(self, settings: Settings, store: Store, clock: Clock, role: str) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.instance_id = new_instance_id(role)
        self.metrics = CollectorRegistry()
        self.engine_metrics = EngineMetrics(self.metrics)
        self.secrets = EnvSecrets()
        self.fence = LeaseFence(settings.engine.fence_margin)
        """This process's engine's lease fence, shared with the plugins that run bodies."""
        self.notifier = Notifier(store.db, self.instance_id, clock=clock)
        self.registry: PluginRegistry | None = None
        self.workflows: dict[tuple[str, str, str], WorkflowSpec] = {}
        """Workflow specs by (project, domain, workflow key) that this process launched from
        its own definitions, or that its engines read: a spec is immutable once stored, and a
        definition's version is the digest of its content, so the store holds the same one.
        Spares a run reading and validating back the spec it just wrote."""
        self.catalog: Catalog | None = None
        self._log_files: LogFiles | None = None
        self.task_logs: TaskLogSink | None = None
        self.resources = QuotaManager.from_config(
            settings.resources,
            store_db=store.db,
            clock=clock,
            metrics=self.metrics,
            notifier=self.notifier,
        )
        # Judged on the store's clock, unless a test gave this process a clock of its own.
        self.rate_limits = ratelimit.from_config(
            settings.resources,
            store_db=store.db,
            clock=None if isinstance(clock, SystemClock) else clock,
        )

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        role: str = "engine",
        upgrade: bool | None = None,
    ) -> Runtime:
        store = await Store.open(settings.database_url, upgrade=upgrade)
        runtime = cls(settings, store, clock or SystemClock(), role)
        await runtime.notifier.start()
        return runtime

    def _plugin_config(self, entry: PluginEntry) -> dict[str, Any]:
        config = dict(self.settings.plugins.config.get(entry.id, {}))
        if entry.id in ("python", "flyte"):
            config.setdefault("workers", self.settings.engine.workers)
            config.setdefault("instance", self.instance_id)
        if entry.id in ("flyte", "flyte_agent", "flyte_agent_sync"):
            config.setdefault("data_dir", str(self.data_dir / "flyte"))
        if entry.id in ("ray", "dask"):  # they run flytekit ray and dask tasks too
            config.setdefault("flyte_data_dir", str(self.data_dir / "flyte"))
        return config

    @property
    def data_dir(self) -> Path:
        """Where task data lives: the SQLite database's directory, or `./.sluice`."""
        path = parse_database_url(self.settings.database_url).path
        return (path.parent if path is not None else Path(".sluice")).resolve()

    async def load_plugins(self, extra: Iterable[PluginEntry] = ()) -> PluginRegistry:
        if self.registry is not None:
            return self.registry
        entries = [*builtin_entries(), *discover_entry_points(), *extra]
        registry = PluginRegistry(
            entries,
            enabled=self.settings.plugins.enabled,
            default_for_task_types=self.settings.plugins.default_for_task_types,
        )
        await registry.load(self._setup_context)
        self.registry = registry
        return registry

    async def warm_up_plugins(self) -> None:
        """Let loaded plugins start what they start with an engine (the python plugin's first
        worker process) now, so that it starts while the execution is being written: the
        engine's start asks again, and a plugin already warm does nothing."""
        for plugin in self.registry.plugins.values() if self.registry is not None else ():
            warm_up = getattr(plugin, "warm_up", None)
            if warm_up is not None:
                await warm_up()

    def _setup_context(self, entry: PluginEntry) -> SetupContext:
        return SetupContext(
            plugin_id=entry.id,
            registrar=self.resources.registrar(entry.id),
            rate_limits=self.rate_limits.for_plugin(entry.id),
            metrics=self.metrics,
            secrets=self.secrets,
            config=self._plugin_config(entry),
            clock=self.clock,
            fence=self.fence,
        )

    @property
    def log_files(self) -> LogFiles:
        """The task log store named by logs.url (a `logs/` directory beside SQLite)."""
        if self._log_files is None:
            url = log_store_url(self.settings.logs, self.settings.database_url)
            self._log_files = LogFiles.from_url(url)
        return self._log_files

    def log_reader(self) -> LogReader:
        return LogReader(self.store.db, self.log_files, self.clock)

    def open_task_logs(self) -> TaskLogSink:
        """The engine side of task logs, flushing in the background from now on."""
        if self.task_logs is None:
            self.task_logs = TaskLogSink(
                self.log_files, self.store.db, self.clock, self.settings.logs, self.instance_id
            )
            self.task_logs.start()
        return self.task_logs

    async def engine(self, only: Iterable[str] | None = None) -> Engine:
        registry = await self.load_plugins()
        services = EngineServices(
            config=self.settings.engine,
            clock=self.clock,
            registry=registry,
            secrets=self.secrets,
            metrics=self.metrics,
            engine_id=self.instance_id,
            counters=self.engine_metrics,
            logs=self.open_task_logs(),
            fence=self.fence,
        )
        await self.resources.start()  # after plugin load: registered quotas are stored now
        await self.rate_limits.start()  # and registered rate limits
        return compose_engine(
            services,
            self.store,
            self.notifier,
            only=only,
            catalog=await self.open_catalog(),
            cache_config=self.settings.cache,
            resources=self.resources,
            resources_config=self.settings.resources,
            workflows=self.workflows,
            rate_limits=self.rate_limits,
        )

    async def open_catalog(self) -> Catalog:
        """The task cache on the store's database; the database clock is the authority on
        PostgreSQL, this process's clock on SQLite (every process shares one machine)."""
        if self.catalog is None:
            clock = None if self.store.db.dialect == "postgresql" else self.clock
            self.catalog = await Catalog.open(
                self.store.db,
                clock=clock,
                config=self.settings.cache,
                metrics=self.metrics,
                notifier=self.notifier,
            )
            await self.catalog.start()
        return self.catalog

    async def launch(
        self,
        target: Any,
        inputs: Mapping[str, Any],
        *,
        project: str | None = None,
        domain: str | None = None,
        options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> ExecutionRecord:
        """Create an execution of `target`; with `idempotency_key`, the one that key created
        already if it did (see executions/idempotency.py)."""
        workflow, launch_plan = resolve_target(target)
        await self.check_tasks(workflow, options)
        if idempotency_key is None:
            record = await self.launch_spec(
                workflow, launch_plan, inputs, project=project, domain=domain, options=options
            )
        else:
            spec = launch_plan or workflow
            kind = "launch_plan" if launch_plan else "workflow"
            launched = await self.launch_spec_once(
                workflow,
                launch_plan,
                inputs,
                idempotency_key,
                target=f"{kind}:{spec.name}@{spec.version}",
                project=project,
                domain=domain,
                options=options,
            )
            record = launched.record
        self.workflows[(record.project, record.domain, record.workflow_key)] = workflow
        return record

    async def launch_spec(
        self,
        workflow: WorkflowSpec,
        launch_plan: LaunchPlanSpec | None,
        inputs: Mapping[str, Any],
        *,
        project: str | None = None,
        domain: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> ExecutionRecord:
        """Create an execution of `workflow` (through `launch_plan`, if any): QUEUED, or
        PENDING when a policy or cap governs it; refused before anything is written if it
        could never run."""
        record = await create_execution(
            self.store,
            self.notifier,
            self.clock,
            project=project or self.settings.project,
            domain=domain or self.settings.domain,
            workflow=workflow,
            inputs=inputs,
            launch_plan=launch_plan,
            options=options,
            limits=claim_limits(self.resources, self.settings.resources),
        )
        assert record is not None
        return record

    async def launch_spec_once(
        self,
        workflow: WorkflowSpec,
        launch_plan: LaunchPlanSpec | None,
        inputs: Mapping[str, Any],
        idempotency_key: str,
        *,
        target: str,
        project: str | None = None,
        domain: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Launched:
        """`launch_spec` under an idempotency key: the execution the key created within the
        retention window (`replayed`), a ConflictError if that was for another request
        (`target`, inputs or options differ), else a new one written with the key."""
        project, domain = project or self.settings.project, domain or self.settings.domain
        digest = request_hash(project, domain, target, inputs, options)
        retention = self.settings.concurrency.idempotency_retention
        return await create_once(
            self.store,
            self.notifier,
            self.clock,
            IdempotencyKey(check_key(idempotency_key), digest, retention),
            project=project,
            domain=domain,
            workflow=workflow,
            inputs=inputs,
            launch_plan=launch_plan,
            options=options,
            limits=claim_limits(self.resources, self.settings.resources),
        )

    async def check_launch(
        self, target: Any, inputs: Mapping[str, Any], options: Mapping[str, Any] | None = None
    ) -> None:
        """Every check `launch` makes, writing nothing: for callers that register first."""
        workflow, launch_plan = resolve_target(target)
        await self.check_tasks(workflow, options)
        values = merge_inputs(workflow, inputs, launch_plan)
        limits = claim_limits(self.resources, self.settings.resources)
        s = self.settings
        await check_launch(workflow, values, s.project, s.domain, launch_plan, limits)

    async def check_tasks(self, workflow: WorkflowSpec, options: Mapping[str, Any] | None) -> None:
        """Every task has a plugin and a config it accepts: PluginNotFoundError (naming the
        registered plugins) or InvalidPluginConfigError before anything is written."""
        registry = await self.load_plugins()
        overrides = (options or {}).get("plugin_overrides", {})
        for task in plugin_tasks(workflow.tasks.values()):
            try:
                plugin = registry.resolve(task.type, overrides.get(task.type, ()))
            except PluginNotFoundError as exc:
                raise PluginNotFoundError(f"task {task.name!r}: {exc}") from None
            validate_task(plugin, task)

    async def close(self) -> None:
        if self.registry is not None:
            for plugin in self.registry.plugins.values():
                closer = getattr(plugin, "close", None)
                if closer is not None:
                    await closer()
        if self.task_logs is not None:  # after the plugins: their last output is in
            await self.task_logs.close()
        if self.catalog is not None:
            await self.catalog.close()
        await self.resources.close()
        await self.rate_limits.close()
        await self.notifier.close()
        await self.store.close()
        self.fence.close()
