"""What a Ray task says about its job (`RayJobConfig`, the task's `custom`) and what the
operator says about the plugin (`RayPluginConfig`, `plugins.config.ray`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sluice.errors import InvalidPluginConfigError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use


class WorkerGroup(_Model):
    """Worker nodes of a cluster the plugin starts: `replicas` local nodes of `cpus` each."""

    name: str = "workers"
    replicas: int = Field(default=1, ge=0, le=16)
    cpus: int = Field(default=1, ge=1, le=256)


class RayJobConfig(_Model):
    """A `type="ray"` task's job: `@sluice.task(type="ray", custom=RayJobConfig(...))`.

    `address` is the dashboard URL of an existing cluster (`http://host:8265`); without it the
    plugin's configured address is used, and without that a local cluster the plugin starts
    (a head of `head_cpus` and the `worker_groups`) and stops when the engine closes, or right
    after this job when `shutdown_after_job` is set.

    `mode="task"` runs the function as a Ray task (no job, no driver process per task) owned
    by the plugin's detached task host actor on the cluster, through the engine's own
    connection to the cluster's GCS (`gcs_address`, or the plugin's, or the local cluster's).
    """

    mode: Literal["job", "task"] = "job"
    address: str | None = None
    gcs_address: str | None = None
    """`host:port` of an existing cluster's GCS (what `ray.init` is given), for `mode="task"`."""
    num_cpus: float = Field(default=1.0, ge=0)
    """CPUs each Ray task claims on the cluster (`mode="task"`)."""
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    """Ray's runtime environment for the job (working_dir, py_modules, pip, env_vars...)."""
    head_cpus: int = Field(default=2, ge=1, le=256)
    worker_groups: tuple[WorkerGroup, ...] = ()
    shutdown_after_job: bool = False
    entrypoint_num_cpus: float | None = Field(default=None, ge=0)
    python: str | None = None
    """The interpreter that runs the task on the cluster (sluice must be installed there);
    default `python` on an existing cluster, this engine's interpreter on a local one."""
    poll_interval: float = Field(default=0.5, gt=0, le=60)
    metadata: dict[str, str] = Field(default_factory=dict)
    flyte: dict[str, Any] | None = None
    """A flytekit task the job runs instead of the task's python source: {"template": its
    TaskTemplate as JSON, "source_root", "module_file"} (set by sluice.flyte's translation of
    a flytekitplugins-ray task)."""

    @field_validator("address")
    @classmethod
    def _dashboard_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be the dashboard's http(s) URL, got {value!r}")
        return value.rstrip("/") if value else value

    @field_validator("gcs_address")
    @classmethod
    def _gcs_address(cls, value: str | None) -> str | None:
        return _host_port(value)

    @model_validator(mode="after")
    def _task_mode(self) -> RayJobConfig:
        if self.mode != "task":
            return self
        if self.shutdown_after_job:
            raise ValueError("mode='task' shares one cluster: shutdown_after_job must be False")
        if self.entrypoint_num_cpus is not None:
            raise ValueError("entrypoint_num_cpus is for jobs; mode='task' takes num_cpus")
        local = [k for k in ("working_dir", "py_modules") if k in self.runtime_env]
        if local:
            raise ValueError(f"mode='task' uploads nothing: runtime_env cannot set {local}")
        return self

    def local_shape(self) -> tuple[int, tuple[WorkerGroup, ...]]:
        """What identifies a local cluster jobs can share."""
        return self.head_cpus, self.worker_groups


class RayPluginConfig(_Model):
    """`plugins.config.ray`."""

    address: str | None = None
    """Dashboard URL of the cluster tasks without an address of their own use."""
    gcs_address: str | None = None
    """`host:port` of that cluster's GCS, for task-mode tasks (`RayJobConfig.mode="task"`)."""
    task_host: str = Field(default="sluice-tasks", min_length=1, max_length=100)
    """Name of the detached actor that owns task-mode tasks on the cluster (namespace
    `sluice`): one per store or engine group sharing the cluster."""
    task_result_grace: float = Field(default=300.0, ge=0)
    """Seconds the task host keeps a finished task's answer after the engine's finalize."""
    start_timeout: float = Field(default=120.0, gt=0)
    """How long a local cluster may take to answer before its tasks fail."""
    flyte_data_dir: str = ".sluice/flyte"
    """Where flytekit tasks write their raw outputs (the store's data directory by default)."""
    max_poll_failures: int = Field(default=6, ge=1)
    """Failed calls to the cluster in a row (a submit, a poll; retried after 1, 2, 4, 8...
    poll intervals, at most 10 s) before the attempt fails as a system error."""

    @field_validator("address")
    @classmethod
    def _dashboard_url(cls, value: str | None) -> str | None:
        return RayJobConfig._dashboard_url(value)

    @field_validator("gcs_address")
    @classmethod
    def _gcs_address(cls, value: str | None) -> str | None:
        return _host_port(value)


def _host_port(value: str | None) -> str | None:
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or "/" in value:
        raise ValueError(f"must be the GCS's host:port, got {value!r}")
    return value


def parse_job_config(custom: dict[str, Any], task_name: str) -> RayJobConfig:
    """The task's config, or InvalidPluginConfigError naming the task and the bad field."""
    try:
        return RayJobConfig.model_validate(custom)
    except ValidationError as exc:
        raise InvalidPluginConfigError(f"task {task_name!r}: ray config: {describe(exc)}") from None


def parse_plugin_config(config: dict[str, Any]) -> RayPluginConfig:
    try:
        return RayPluginConfig.model_validate(config)
    except ValidationError as exc:
        raise InvalidPluginConfigError(f"plugins.config.ray: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """The first error as `field: message, got value`."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "config"
    message = str(error["msg"]).removeprefix("Value error, ")
    got = "" if error["type"] == "missing" else f", got {error.get('input')!r}"
    return f"{where}: {message}{got}"
