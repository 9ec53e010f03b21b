"""Translation of Kubernetes API failures into sluice's k8s errors, and quantities."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from sluice.errors import SluiceError
from sluice.plugins.k8s import (
    KubeAlreadyExistsError,
    KubeApiError,
    KubeConflictError,
    KubeEntityTooLargeError,
    KubeForbiddenError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeQuotaExceededError,
    translate_status,
)
from sluice.plugins.k8s.quantity import parse_quantity, quota_requests_exceed_limits

QUOTA_MESSAGE = (
    'pods "p-1" is forbidden: exceeded quota: compute-resources, '
    "requested: limits.cpu=2,limits.memory=3Gi, used: limits.cpu=1,limits.memory=1Gi, "
    "limited: limits.cpu=4,limits.memory=2Gi"
)


def status_body(reason: str, message: str, code: int) -> bytes:
    return json.dumps(
        {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": code}
    ).encode()


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (409, "AlreadyExists", KubeAlreadyExistsError),
        (409, "Conflict", KubeConflictError),
        (404, "NotFound", KubeNotFoundError),
        (410, "Expired", KubeGoneError),
        (403, "Forbidden", KubeForbiddenError),
        (400, "BadRequest", KubeInvalidError),
        (422, "Invalid", KubeInvalidError),
        (413, "RequestEntityTooLarge", KubeEntityTooLargeError),
        (500, "InternalError", KubeApiError),
        (429, "TooManyRequests", KubeApiError),
    ],
)
def test_status_and_reason_choose_the_error(status, reason, expected):
    error = translate_status(status, status_body(reason, "the message", status))
    assert type(error) is expected
    assert (error.status, error.reason, error.message) == (status, reason, "the message")
    assert isinstance(error, SluiceError)


def test_quota_refusal_is_recognised_and_knows_when_it_can_never_fit():
    error = translate_status(403, status_body("Forbidden", QUOTA_MESSAGE, 403))
    assert isinstance(error, KubeQuotaExceededError)
    assert isinstance(error, KubeForbiddenError)
    assert error.requests_exceed_limits  # 3Gi of memory asked, 2Gi is the hard limit


def test_quota_refusal_that_may_fit_later():
    message = QUOTA_MESSAGE.replace("limits.memory=3Gi,", "limits.memory=1Gi,", 1)
    error = translate_status(403, {"message": message})
    assert isinstance(error, KubeQuotaExceededError)
    assert not error.requests_exceed_limits


def test_bodies_that_are_not_status_objects():
    assert translate_status(500, b"upstream connect error").message == "upstream connect error"
    assert translate_status(502, None, "Bad Gateway").message == "Bad Gateway"
    assert translate_status(503, "").message == "HTTP 503"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        (1.5, Decimal("1.5")),
        ("1Gi", Decimal(2**30)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("128974848", Decimal(128974848)),
    ],
)
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "2 Gi", "1.2.3"])
def test_bad_quantities(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_quota_message_without_the_usual_shape_is_not_hopeless():
    assert not quota_requests_exceed_limits("exceeded quota: q, must specify limits.cpu")
