"""Typed configuration from `SLUICE_*` environment variables and a TOML file.

Precedence, highest first: keyword overrides, environment (`SLUICE_ENGINE__WORKERS=4`, nested
keys joined by a double underscore, dicts and lists as JSON), the TOML file (`--config`,
`SLUICE_CONFIG`, or `./sluice.toml` when present), then the defaults below.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from sluice.errors import ConfigError
from sluice.spec.names import (
    check_namespace_name,
    check_rate_limit_name,
    check_scope_name,
    shown,
)

DEFAULT_DATABASE_URL = "sqlite:///.sluice/sluice.db"
LARGEST_SETTING = 1_000_000_000
"""No count, cap or limit in config may exceed this (a larger one is a typo, and overflows
the database's integers)."""

Positive = Annotated[int, Field(ge=1)]


def _bounded(value: Any) -> Any:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and abs(value) > LARGEST_SETTING:
        raise ValueError(f"must be at most {LARGEST_SETTING:_} in size")
    if isinstance(value, dict):
        for item in value.values():
            _bounded(item)
    return value


class _Section(BaseModel):
    # NaN or infinity in an interval, lease or delay would never fire or fire always.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(str(info.field_name))
        if isinstance(value, bool) and field is not None and field.annotation in (int, float):
            raise ValueError("expected a number, not a bool")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _no_astronomical_numbers(cls, value: Any) -> Any:
        return _bounded(value)


class EngineConfig(_Section):
    workers: int = Field(default_factory=lambda: max(2, os.cpu_count() or 2), ge=1, le=512)
    """Size of the local process pool that runs python tasks."""
    parallelism: int = Field(default=200, ge=1)
    """Most tasks one engine drives at once; the rest wait, ordered by the scheduler policy."""
    resync_interval: float = Field(default=10.0, gt=0)
    """Safety-net re-evaluation of every owned execution; events drive the normal path."""
    execution_lease: float = Field(default=30.0, gt=0)
    """An engine that stops renewing its executions for this long loses them to another."""
    fence_margin: float = Field(default=0.25, gt=0, lt=1)
    """Fraction of each lease kept between an engine's own deadline (no renewal proven for
    lease x (1 - margin), on its monotonic clock) and the lease's end in the store: past
    its deadline an engine launches nothing and its workers end their bodies."""
    drain_timeout: float = Field(default=30.0, ge=0)
    """Seconds a SIGTERM gives running attempts to finish and record their end before the
    rest are stopped and handed over to another engine; a second signal stops at once."""
    backoff_base: float = Field(default=2.0, ge=0)
    backoff_max: float = Field(default=20.0, ge=0)
    max_plugin_phase_versions: int = Field(default=100_000, ge=1)
    max_system_failures: int = Field(default=3, ge=0)
    """Retryable system failures (a dead worker, a lost engine) allowed beyond user retries."""
    scheduler_policy: Literal["default", "fifo", "shared_locks_first"] = "default"
    starvation_bound: float = Field(default=300.0, gt=0)
    """Seconds after which a waiting task stops being overtaken (see locks/scheduler.py)."""
    plugin_call_timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """Longest one plugin call (handle, abort, finalize) may take; an overrun is cancelled and
    fails the attempt as a retryable system error. A task's own timeout bounds it further."""
    max_reconcile_failures: int = Field(default=5, ge=1)
    """Consecutive failed reconciles (backing off between them) before the execution FAILS."""
    store_gone_timeout: float = Field(default=30.0, gt=0)
    """Seconds a dropped database (or removed SQLite file) may take to return before the
    engine stops (exit 4)."""


class PluginsConfig(_Section):
    enabled: list[str] | None = None
    """Plugin ids to load; None loads every builtin and every installed third-party plugin."""
    default_for_task_types: dict[str, str] = Field(default_factory=dict)
    config: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-plugin settings, keyed by plugin id."""


class ResourcesConfig(_Section):
    url: str | None = None
    """Token backend: memory://, sqlite:///..., postgresql://..., redis://...; None: the store."""
    max_quota: int = Field(default=1000, ge=1)
    lease: float = Field(default=30.0, gt=0)
    """Lease of a granted token; live tasks renew it, a crashed holder's token returns after it."""
    quotas: dict[str, Positive] = Field(default_factory=dict)
    """Operator quotas by namespace; they win over quotas plugins register."""
    lock_rules: dict[str, Positive] = Field(default_factory=dict)
    """Capacity of lock names by glob pattern (`db/partition/*` = 1); unmatched locks get 1."""
    key_prefix: str = "sluice"
    """Prefix of every Redis key."""
    preempt: list[str] = Field(default_factory=list)
    """Namespaces (glob patterns: `warehouse`, `lock:db/partition/*`) where a higher-priority
    claim may preempt lower-priority holders (docs/resources.md, "Priority preemption")."""
    rate_limits: dict[str, str] = Field(default_factory=dict)
    """Rate limits by name: `openai = "100/min"` or `"100/min, burst 10"` (per s, min, hour or
    day); they win over limits plugins register, an operator's `sluice ratelimit set` over them."""

    @field_validator("rate_limits", mode="after")
    @classmethod
    def _valid_rates(cls, value: dict[str, str]) -> dict[str, str]:
        from sluice.spec.rates import RateLimitRule

        for name, rate in value.items():
            check_rate_limit_name(name, where="resources.rate_limits")
            RateLimitRule.parse(rate)
        return value

    @field_validator("preempt", mode="after")
    @classmethod
    def _valid_preempt(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip() or pattern != pattern.strip():
                raise ValueError(
                    f"resources.preempt: {pattern!r} is not a namespace or glob pattern"
                    " (non-empty, no surrounding spaces)"
                )
        return value

    @field_validator("quotas", "lock_rules", mode="after")
    @classmethod
    def _within_max_quota(cls, value: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        """A quota or lock capacity above max_quota could never be stored, so never granted."""
        top = info.data.get("max_quota", 1000)
        for name, capacity in value.items():
            if info.field_name == "quotas":
                check_namespace_name(name, where="resources.quotas")
            if capacity > top:
                raise ValueError(f"{name!r} = {capacity} is above resources.max_quota ({top})")
        return value


class CacheConfig(_Section):
    heartbeat_grace_period_multiplier: int = 3
    max_reservation_heartbeat: float = 10.0
    heartbeat_interval: float = Field(default=10.0, gt=0)
    """How often a running owner extends its reservation (capped by the max above)."""


class ConcurrencyConfig(_Section):
    max_per_project: dict[str, Positive] = Field(default_factory=dict)
    """Platform cap of active executions per project."""
    max_per_domain: dict[str, Positive] = Field(default_factory=dict)
    """Platform cap of active executions per `project/domain`."""
    catch_up: Literal["none", "latest", "all"] = "latest"
    catch_up_max: int = Field(default=10, ge=1)
    """With catch_up = "all", at most this many missed firings are launched after downtime."""
    idempotency_retention: float = Field(default=86400.0, gt=0, le=LARGEST_SETTING)
    """Seconds an idempotency key keeps answering with the execution it created; after that
    the key may create a new one."""
    backfill_max_active: int = Field(default=10, ge=1, le=LARGEST_SETTING)
    """A backfill's cap on its unfinished executions when `--max-active` is not given."""
    backfill_max_slots: int = Field(default=10_000, ge=1, le=LARGEST_SETTING)
    """The most schedule slots one backfill may cover (a larger range is refused)."""


class LogsConfig(_Section):
    """Task logs (sluice/logs/): where the stdout and stderr of every attempt are kept."""

    enabled: bool = True
    """False discards task output (it still never reaches the engine's terminal)."""
    url: str | None = None
    """Log store, any fsspec URL: file:///dir, memory://, s3://bucket/prefix (needs s3fs), ...
    None: a `logs/` directory beside the SQLite database, or `./.sluice/logs` with PostgreSQL
    (set a shared URL when engines run on several machines)."""
    max_bytes_per_attempt: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Past this, the oldest segments after the first are removed: the head and the newest
    tail of a long log are kept, and what was removed is counted."""
    segment_bytes: int = Field(default=1024 * 1024, ge=256)
    """Size at which a log segment is closed and a new one started."""
    flush_interval: float = Field(default=0.5, gt=0, le=60)
    """Seconds between flushes of buffered lines to the log store and the index."""

    @model_validator(mode="after")
    def _segments_fit(self) -> LogsConfig:
        """Rotation keeps the first segment and the newest: two must fit in the limit."""
        if self.segment_bytes * 2 > self.max_bytes_per_attempt:
            raise ValueError(
                f"logs.segment_bytes ({self.segment_bytes}) must be at most half of "
                f"logs.max_bytes_per_attempt ({self.max_bytes_per_attempt})"
            )
        return self


class PayloadsConfig(_Section):
    """How big the values the API and the UI take and show may be."""

    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """A request body larger than this is refused (413) before it is read."""
    max_inputs_bytes: int = Field(default=512 * 1024, ge=64)
    """An execution's inputs, as compact JSON, larger than this are refused (422) at launch."""
    shown_value_chars: int = Field(default=2000, ge=80)
    """Inputs and outputs in pages and API views are cut to about this many characters per
    string (and 100 items per list or object), with a link to the whole value."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SLUICE_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    database_url: str = DEFAULT_DATABASE_URL
    project: str = "default"
    domain: str = "development"
    engine: EngineConfig = Field(default_factory=EngineConfig)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    payloads: PayloadsConfig = Field(default_factory=PayloadsConfig)

    @field_validator("project", "domain", mode="after")
    @classmethod
    def _valid_scope(cls, value: str, info: ValidationInfo) -> str:
        return check_scope_name(str(info.field_name), value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file is named by model_config["toml_file"], set per call by load_config.
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def _config_path(path: str | Path | None, env: Mapping[str, str]) -> Path | None:
    if path is not None:
        chosen = Path(path)
    elif env.get("SLUICE_CONFIG"):
        chosen = Path(env["SLUICE_CONFIG"])
    elif Path("sluice.toml").is_file():
        chosen = Path("sluice.toml")
    else:
        return None
    if not chosen.is_file():
        raise ConfigError(f"config file {str(chosen)!r} does not exist")
    return chosen


def _describe(error: Any) -> str:
    key = ".".join(str(part) for part in error["loc"])
    env_name = "SLUICE_" + "__".join(str(part).upper() for part in error["loc"])
    text = str(error["msg"]).removeprefix("Value error, ")
    message = f"config {key} ({env_name}): {text}"
    if error["type"] not in ("missing", "extra_forbidden") and ", got " not in text:
        message += f", got {shown(error['input'])}"
    elif error["type"] == "extra_forbidden":
        message = f"config {key} ({env_name}): unknown key"
    return message


def load_config(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Read the configuration; a bad value raises ConfigError naming every bad key."""
    toml_file = _config_path(path, os.environ)
    bound = type(
        "Settings", (Settings,), {"model_config": {**Settings.model_config, "toml_file": toml_file}}
    )
    try:
        settings: Settings = bound(**overrides)
        return settings
    except ValidationError as exc:
        raise ConfigError("; ".join(_describe(error) for error in exc.errors())) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(toml_file)!r} is not valid TOML: {exc}") from None
    except ValueError as exc:  # pydantic-settings could not decode a complex env value
        raise ConfigError(_bad_env_json(os.environ) or f"config: {exc}") from None


def _bad_env_json(env: Mapping[str, str]) -> str:
    """Name the SLUICE_* variable whose JSON value does not parse, with its value."""
    for name, value in sorted(env.items()):
        if not name.startswith("SLUICE_") or not value.lstrip().startswith(("{", "[")):
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            key = name.removeprefix("SLUICE_").lower().replace("__", ".")
            return f"config {key} ({name}): expected JSON ({exc.msg}), got {value!r}"
    return ""
