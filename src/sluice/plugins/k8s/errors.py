"""Errors of the Kubernetes API, as sluice sees them, whichever client produced them.

Every KubeClient translates its driver's exceptions here, once, with `translate_status`.

Hierarchy::

    SluiceError
    └── KubeApiError                 any other failure: 5xx, 429, 401, connection, timeout
        ├── KubeAlreadyExistsError   409 AlreadyExists: create of a name that exists
        ├── KubeConflictError        409 Conflict: stale resourceVersion on patch or update
        ├── KubeNotFoundError        404: the object (or its namespace) does not exist
        ├── KubeGoneError            410: a watch's resourceVersion is too old; relist
        ├── KubeForbiddenError       403: RBAC, admission webhooks, pod security
        │   └── KubeQuotaExceededError   403 "exceeded quota": a ResourceQuota refused it
        └── KubeInvalidError         400 BadRequest, 422 Invalid: the manifest is wrong
            └── KubeEntityTooLargeError  413: the manifest is too large
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sluice.errors import SluiceError
from sluice.plugins.k8s.quantity import quota_requests_exceed_limits


class KubeApiError(SluiceError):
    """A Kubernetes API call failed; `status` is the HTTP status (0: no response)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class KubeAlreadyExistsError(KubeApiError):
    pass


class KubeConflictError(KubeApiError):
    pass


class KubeNotFoundError(KubeApiError):
    pass


class KubeGoneError(KubeApiError):
    pass


class KubeForbiddenError(KubeApiError):
    pass


class KubeQuotaExceededError(KubeForbiddenError):
    """A ResourceQuota refused the object. `requests_exceed_limits` is True when what the
    object asks for is above the quota's hard limit, so it can never be admitted."""

    def __init__(
        self,
        message: str,
        status: int = 403,
        reason: str = "",
        requests_exceed_limits: bool = False,
    ) -> None:
        super().__init__(message, status, reason)
        self.requests_exceed_limits = requests_exceed_limits


class KubeInvalidError(KubeApiError):
    pass


class KubeEntityTooLargeError(KubeInvalidError):
    pass


_BY_STATUS: dict[int, type[KubeApiError]] = {
    400: KubeInvalidError,
    403: KubeForbiddenError,
    404: KubeNotFoundError,
    410: KubeGoneError,
    413: KubeEntityTooLargeError,
    422: KubeInvalidError,
}


def translate_status(status: int, body: Any = None, reason: str = "") -> KubeApiError:
    """The sluice error for an HTTP status and a Kubernetes `Status` body (dict, JSON text or
    bytes; anything else is kept as the message)."""
    parsed = _parse_body(body)
    reason = str(parsed.get("reason") or reason or "")
    message = str(parsed.get("message") or reason or f"HTTP {status}")
    if status == 409:
        kind: type[KubeApiError] = (
            KubeAlreadyExistsError if reason == "AlreadyExists" else KubeConflictError
        )
        return kind(message, status, reason)
    if status == 403 and "exceeded quota" in message:
        exceeds = quota_requests_exceed_limits(message)
        return KubeQuotaExceededError(message, status, reason, requests_exceed_limits=exceeds)
    return _BY_STATUS.get(status, KubeApiError)(message, status, reason)


def _parse_body(body: Any) -> Mapping[str, Any]:
    if isinstance(body, Mapping):
        return body
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"message": body.strip()}
    return parsed if isinstance(parsed, Mapping) else {}
