"""What a Dask task says about where it runs (`DaskJobConfig`, the task's `custom`) and what
the operator says about the plugin (`DaskPluginConfig`, `plugins.config.dask`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.ray.config import describe


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use


def _scheduler_address(value: str | None) -> str | None:
    if value is not None and "://" not in value:
        raise ValueError(f"must be a scheduler address like tcp://host:8786, got {value!r}")
    return value


class DaskJobConfig(_Model):
    """A `type="dask"` task: `@sluice.task(type="dask", custom=DaskJobConfig(...))`.

    `address` is an existing scheduler (`tcp://host:8786`); without it the plugin's configured
    address is used, and without that a local cluster the plugin starts (`workers` processes
    of `threads` each, on 127.0.0.1) and stops when the engine closes.
    """

    address: str | None = None
    workers: int = Field(default=2, ge=1, le=64)
    threads: int = Field(default=1, ge=1, le=64)
    resources: dict[str, float] = Field(default_factory=dict)
    """Dask worker resources the task needs (`{"GPU": 1}`), as `Client.submit(resources=)`."""
    flyte: dict[str, Any] | None = None
    """A flytekit task to run instead of the task's python source: {"template": its
    TaskTemplate as JSON, "source_root", "module_file"} (set by sluice.flyte's translation of
    a flytekitplugins-dask task)."""

    _check_address = field_validator("address")(_scheduler_address)

    def local_shape(self) -> tuple[int, int]:
        return self.workers, self.threads


class DaskPluginConfig(_Model):
    """`plugins.config.dask`."""

    address: str | None = None
    start_timeout: float = Field(default=120.0, gt=0)
    """How long a scheduler may take to answer (and a local cluster to get its workers)."""
    flyte_data_dir: str = ".sluice/flyte"
    """Where flytekit tasks write their raw outputs (the store's data directory by default)."""

    _check_address = field_validator("address")(_scheduler_address)


def parse_job_config(custom: dict[str, Any], task_name: str) -> DaskJobConfig:
    try:
        return DaskJobConfig.model_validate(custom)
    except ValidationError as exc:
        message = f"task {task_name!r}: dask config: {describe(exc)}"
        raise InvalidPluginConfigError(message) from None


def parse_plugin_config(config: dict[str, Any]) -> DaskPluginConfig:
    try:
        return DaskPluginConfig.model_validate(config)
    except ValidationError as exc:
        raise InvalidPluginConfigError(f"plugins.config.dask: {describe(exc)}") from None
