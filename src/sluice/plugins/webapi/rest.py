"""Helpers for web-API plugins over REST services: what an HTTP answer means to the machinery
(a success, RetryLater, PermanentError, ResourceVanishedError or a transient error), headers
with secrets, JSON objects, and phases named in a task's config.

How answers are read (`check_response`), by operation:
- 429, or 503 with Retry-After, on any call: RetryLater(Retry-After seconds, at most
  `max_delay`; DEFAULT_RETRY_AFTER when the header is absent).
- create: 2xx/3xx success; other 4xx except 408 and 425 permanent (a retry would be rejected
  the same way); 5xx and 408/425 transient (raised as httpx.HTTPStatusError).
- get: 404 or 410 means the job vanished; any other 4xx or 5xx is a failed poll.
- delete: 404, 409 and 410 mean the job is already gone or done, which is what was wanted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sluice.errors import NotFoundError
from sluice.plugins.core.context import SecretManager
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, TaskInfo
from sluice.plugins.webapi.interfaces import PermanentError, ResourceVanishedError, RetryLater
from sluice.plugins.webapi.templates import read_field, render, retry_after
from sluice.resources.models import ResourceConstraintsSpec

if TYPE_CHECKING:
    import httpx  # imported where a request is made: only tasks that call out pay for it

DEFAULT_RETRY_AFTER = 5.0
"""Seconds to wait after a 429 that carries no Retry-After header."""

PhaseName = Literal[
    "WAITING_FOR_RESOURCES",
    "QUEUED",
    "INITIALIZING",
    "RUNNING",
    "SUCCESS",
    "RETRYABLE_FAILURE",
    "PERMANENT_FAILURE",
]
Operation = Literal["create", "get", "delete"]


class QuotaClaim(BaseModel):
    """The quota a task draws from, as a task config states it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = "default"
    project_scope: int | None = Field(default=None, ge=1)
    namespace_scope: int | None = Field(default=None, ge=1)

    def requirements(self) -> tuple[str, ResourceConstraintsSpec | None]:
        """What `AsyncPlugin.resource_requirements` returns for this claim."""
        if self.project_scope is None and self.namespace_scope is None:
            return self.namespace, None
        return self.namespace, ResourceConstraintsSpec(self.project_scope, self.namespace_scope)


def check_response(
    response: httpx.Response, operation: Operation, now: float, max_delay: float
) -> httpx.Response:
    """`response` if it is a success; otherwise raise what it means (see the module doc)."""
    code, where = response.status_code, f"{response.request.method} {response.request.url}"
    if code == 429 or (code == 503 and "retry-after" in response.headers):
        found = retry_after(response.headers.get("retry-after"), now)
        delay = min(max_delay, DEFAULT_RETRY_AFTER if found is None else found)
        raise RetryLater(delay, f"HTTP {code} from {where}")
    if code < 400 or (operation == "delete" and code in (404, 409, 410)):
        return response
    detail = f"{where}: HTTP {code}: {snippet(response.text)}"
    if operation == "get" and code in (404, 410):
        raise ResourceVanishedError(detail)
    if operation == "create" and code < 500 and code not in (408, 425):
        raise PermanentError("CreateRejected", detail)
    import httpx

    raise httpx.HTTPStatusError(detail, request=response.request, response=response)


def phase_info(name: PhaseName, info: TaskInfo, reason: str) -> PhaseInfo:
    """The PhaseInfo a config names; failures are the remote job's (USER, RemoteJobFailed)."""
    if name == "SUCCESS":
        return PhaseInfo.success(info, reason)
    if name == "PERMANENT_FAILURE":
        return PhaseInfo.permanent_failure("RemoteJobFailed", reason, ErrorKind.USER, info)
    if name == "RETRYABLE_FAILURE":
        return PhaseInfo.retryable_failure("RemoteJobFailed", reason, ErrorKind.USER, info)
    constructor = {
        "WAITING_FOR_RESOURCES": PhaseInfo.waiting_for_resources,
        "QUEUED": PhaseInfo.queued,
        "INITIALIZING": PhaseInfo.initializing,
        "RUNNING": PhaseInfo.running,
    }[name]
    return constructor(0, reason, info)


def render_headers(templates: dict[str, str], secrets: SecretManager) -> dict[str, str]:
    """Headers with their `{secret:NAME}` placeholders filled; a missing secret is permanent."""

    def secret(name: str) -> str:
        try:
            return secrets.get(name.removeprefix("secret:"))
        except NotFoundError as exc:
            raise PermanentError("MissingSecret", f"headers: {exc}") from None

    return {name: render(value, secret) for name, value in templates.items()}


def json_object(response: httpx.Response) -> dict[str, Any]:
    if not response.content:
        return {}
    data = response.json()
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object from {response.request.url}, got {data!r}")
    return data


def optional_field(data: Any, path: str | None) -> Any:
    try:
        return read_field(data, path) if path else None
    except KeyError:
        return None


def snippet(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
