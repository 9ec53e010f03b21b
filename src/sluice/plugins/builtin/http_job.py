"""The `http_job` plugin: a job on a generic REST service (POST to create, GET for its state,
DELETE to cancel), configured per task in `TaskSpec.custom` (HttpJobConfig).

- 429 (or 503 + Retry-After) on create: the task waits (WAITING_FOR_RESOURCES, no retry spent)
  and the same create, with the same Idempotency-Key, is sent after Retry-After seconds
  (capped by `max_retry_after`). On a poll: not a failure; polls pause for Retry-After.
- Other 4xx on create: permanent failure. 5xx or network errors on create: retryable system
  failure; on a poll: a failed poll, and more than `caching.max_system_failures` in a row are a
  retryable system failure that asks the engine to clean up (abort, so DELETE).
- 404/410 on a poll: retryable system failure "job vanished".
- A job that never ends is polled until the engine's task timeout aborts it: DELETE is sent.
- A remote state missing from `states` is `unknown_state` (default PERMANENT_FAILURE).
HTTP answers are read in one place: sluice.plugins.webapi.rest.check_response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.context import SetupContext, TaskExecutionContext
from sluice.plugins.core.phase import PhaseInfo, TaskInfo
from sluice.plugins.webapi import (
    DeleteContext,
    GetContext,
    PermanentError,
    PluginConfig,
    ResourceMeta,
    StatusContext,
    webapi_entry,
)
from sluice.plugins.webapi.rest import (
    Operation,
    PhaseName,
    QuotaClaim,
    check_response,
    json_object,
    optional_field,
    phase_info,
    render_headers,
    snippet,
)
from sluice.plugins.webapi.templates import (
    TemplateError,
    json_placeholders,
    lookup_in,
    placeholders,
    read_field,
    render,
    render_json,
)
from sluice.resources.models import ResourceConstraintsSpec
from sluice.spec.models import TaskSpec

if TYPE_CHECKING:
    import httpx  # imported where a request is made: only tasks that call out pay for it

PLUGIN_ID = "http_job"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use


class CreateRequest(_Model):
    url: str
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    body: Any = None
    """JSON template: strings are filled from the task inputs."""
    headers: dict[str, str] = Field(default_factory=dict)


class HttpJobConfig(_Model):
    """A task's `custom`. URLs and the body are templates over the task inputs; the status and
    cancel URLs also get `{job_id}`; headers only `{secret:NAME}` (they are kept with the task
    to poll it later, so secrets stay placeholders). Fields of responses are dotted paths."""

    create: CreateRequest
    status_url: str
    cancel_url: str | None = None
    """Defaults to status_url."""
    cancel_method: Literal["DELETE", "POST", "PUT"] = "DELETE"
    headers: dict[str, str] = Field(default_factory=dict)
    id_field: str = "id"
    state_field: str = "state"
    message_field: str | None = "message"
    states: dict[str, PhaseName] = Field(min_length=1)
    unknown_state: PhaseName = "PERMANENT_FAILURE"
    outputs: dict[str, str] = Field(default_factory=dict)
    """Output name -> response field, written when the job succeeds."""
    quota: QuotaClaim = Field(default_factory=QuotaClaim)
    idempotency_header: str | None = "Idempotency-Key"
    max_retry_after: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _check_templates(self) -> HttpJobConfig:
        if "SUCCESS" not in self.states.values():
            raise ValueError("states: no remote state maps to SUCCESS")
        for name, url in self._urls().items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{name}: must start with http:// or https://, got {url!r}")
            if name != "create.url" and "job_id" not in placeholders(url):
                raise ValueError(f"{name}: must contain {{job_id}}, got {url!r}")
        for name, value in {**self.headers, **self.create.headers}.items():
            if any(not p.startswith("secret:") for p in placeholders(value)):
                raise ValueError(f"headers.{name}: only {{secret:NAME}} placeholders are allowed")
        if "job_id" in self.input_names():
            raise ValueError("create: {job_id} is only known after the job is created")
        return self

    def _urls(self) -> dict[str, str]:
        urls = {"create.url": self.create.url, "status_url": self.status_url}
        return urls | ({"cancel_url": self.cancel_url} if self.cancel_url else {})

    def input_names(self) -> set[str]:
        """The task inputs the templates use."""
        names = placeholders(self.create.url) | json_placeholders(self.create.body)
        for url in (self.status_url, self.cancel_url or ""):
            names |= placeholders(url) - {"job_id"}
        return names


def parse_config(custom: dict[str, Any]) -> HttpJobConfig:
    """The task's config; PermanentError naming the first bad field."""
    try:
        return HttpJobConfig.model_validate(custom)
    except (ValidationError, TemplateError) as exc:
        raise PermanentError("BadTaskConfig", f"http_job config: {_describe(exc)}") from None


def _describe(exc: ValidationError | TemplateError) -> str:
    if isinstance(exc, TemplateError):
        return str(exc)
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    got = "" if error["type"] in ("missing", "value_error") else f", got {error['input']!r}"
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {message}{got}" if where else message


class HttpJobPlugin:
    """An AsyncPlugin over httpx. One client per plugin, closed with the engine."""

    def validate_task(self, task: TaskSpec) -> None:
        try:
            parse_config(task.custom)
        except PermanentError as exc:
            raise InvalidPluginConfigError(f"task {task.name!r}: {exc.message}") from None

    def __init__(
        self, config: PluginConfig, setup: SetupContext, timeout: float, max_connections: int
    ) -> None:
        self.config = config
        self._clock = setup.clock
        self._timeout = timeout
        self._max_connections = max_connections
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            limits = httpx.Limits(max_connections=self._max_connections)
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=limits)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]:
        return parse_config(ctx.task.custom).quota.requirements()

    async def create(self, ctx: TaskExecutionContext) -> tuple[ResourceMeta, Any]:
        config = parse_config(ctx.task.custom)
        url, body = _render_request(config, ctx.inputs)
        header_templates = {**config.headers, **config.create.headers}
        headers = render_headers(header_templates, ctx.secrets)
        if config.idempotency_header:
            headers[config.idempotency_header] = ctx.metadata.generated_name()
        response = await self.client.request(config.create.method, url, json=body, headers=headers)
        data = json_object(self._checked(response, "create", config.max_retry_after))
        return _meta(config, ctx, data, header_templates), _resource_if_stated(config, data)

    async def get(self, ctx: GetContext) -> Any:
        meta = ctx.resource_meta
        headers = render_headers(meta["headers"], ctx.secrets)
        response = await self.client.get(meta["status_url"], headers=headers)
        return json_object(self._checked(response, "get", meta["max_retry_after"]))

    async def delete(self, ctx: DeleteContext) -> None:
        meta = ctx.resource_meta
        headers = render_headers(meta["headers"], ctx.secrets)
        method, url = meta["cancel_method"], meta["cancel_url"]
        response = await self.client.request(method, url, headers=headers)
        self._checked(response, "delete", meta["max_retry_after"])

    def _checked(
        self, response: httpx.Response, operation: Operation, max_delay: float
    ) -> httpx.Response:
        return check_response(response, operation, self._clock.now(), max_delay)

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        config = parse_config(ctx.task.task.custom)
        resource, job_id = ctx.resource, ctx.resource_meta["job_id"]
        try:
            state = str(read_field(resource, config.state_field))
        except KeyError:
            raise PermanentError(
                "BadResponse",
                f"job {job_id}: the status response has no "
                f"field {config.state_field!r}: {snippet(resource)}",
            ) from None
        info = TaskInfo(external_id=str(job_id), custom_info={"state": state})
        phase = config.states.get(state)
        if phase is None:
            return phase_info(
                config.unknown_state,
                info,
                f"job {job_id} is in state {state!r}, "
                f"which is not in states {sorted(config.states)}",
            )
        message = optional_field(resource, config.message_field)
        if phase == "SUCCESS":
            ctx.task.outputs.put(_outputs(config, resource, job_id))
        reason = f"job {job_id} is {state}" + (f": {message}" if message else "")
        return phase_info(phase, info, reason)


def _render_request(config: HttpJobConfig, inputs: Mapping[str, Any]) -> tuple[str, Any]:
    missing = sorted(config.input_names() - set(inputs))
    if missing:  # checked before the POST: afterwards a failure would orphan the job
        raise PermanentError(
            "BadTaskConfig",
            f"http_job config uses {{{missing[0]}}}, which is not a task input; "
            f"inputs: {sorted(inputs)}",
        )
    lookup = lookup_in(dict(inputs), "the task inputs")
    return render(config.create.url, lookup, url=True), render_json(config.create.body, lookup)


def _meta(
    config: HttpJobConfig,
    ctx: TaskExecutionContext,
    data: dict[str, Any],
    header_templates: dict[str, str],
) -> ResourceMeta:
    try:
        job_id = read_field(data, config.id_field)
    except KeyError:
        # Permanent: creating again would start a second job we could not track either.
        raise PermanentError(
            "BadResponse", f"the create response has no field {config.id_field!r}: {snippet(data)}"
        ) from None
    lookup = lookup_in({**ctx.inputs, "job_id": job_id}, "the task inputs")
    status_url = render(config.status_url, lookup, url=True)
    cancel_url = render(config.cancel_url, lookup, url=True) if config.cancel_url else status_url
    return {
        "job_id": job_id,
        "status_url": status_url,
        "cancel_url": cancel_url,
        "cancel_method": config.cancel_method,
        "headers": header_templates,
        "max_retry_after": config.max_retry_after,
    }


def _resource_if_stated(config: HttpJobConfig, data: dict[str, Any]) -> Any:
    # A create response that already carries the state saves waiting for the first poll.
    return data if optional_field(data, config.state_field) is not None else None


def _outputs(config: HttpJobConfig, resource: Any, job_id: Any) -> dict[str, Any]:
    values = {}
    for name, path in config.outputs.items():
        try:
            values[name] = read_field(resource, path)
        except KeyError:
            raise PermanentError(
                "MissingOutput",
                f"job {job_id} succeeded but its response has "
                f"no field {path!r} for output {name!r}",
            ) from None
    return values


def _load(setup: SetupContext) -> HttpJobPlugin:
    timeout = setup.config.get("timeout", 30.0)
    connections = setup.config.get("max_connections", 100)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidPluginConfigError(f"timeout must be a number > 0, got {timeout!r}")
    if isinstance(connections, bool) or not isinstance(connections, int) or connections < 1:
        raise InvalidPluginConfigError(f"max_connections must be an int >= 1, got {connections!r}")
    config = PluginConfig(resource_quotas={"default": 1000})
    return HttpJobPlugin(config, setup, float(timeout), connections)


ENTRY = webapi_entry(
    PLUGIN_ID, (PLUGIN_ID,), _load, plugin_config_keys=("timeout", "max_connections")
)

"""Register with the engine's PluginRegistry; config section `plugins.config.http_job`."""
