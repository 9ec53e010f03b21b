"""Schemathesis against the live schema of a running `sluice serve`: every documented
operation, with generated valid and invalid input, never answers 500, and every response
(status, content type, body, headers) is one the schema documents. Bounded: a few examples
per operation, so the whole run takes well under a minute."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from support.http_world import open_sluice, populate

ROOT = Path(__file__).resolve().parents[2]
MAX_EXAMPLES = 8
SEMANTIC_REFUSALS = re.compile(
    "|".join(
        [
            r"^cursor .* is not one this server gave$",  # an opaque token: only the server's
            r"has no input",  # a launch plan's inputs are its own, not the schema's
            r"input .* is (required|fixed)",
            r": input '.*': ",  # an input's value against its declared type
            r"is ambiguous, it matches",  # an id prefix of several executions
            r"^removing cache entries needs keys or a task name$",
            r"^--attempt .* needs a node",
        ]
    )
)
"""What only the server can know (not the schema): the 422s a schema-valid request may get."""


def declared_limits_hold(ctx: Any, response: Any, case: schemathesis.Case) -> bool | None:
    """A schema-valid request is never refused for a limit the schema could have stated: a
    422 on generated positive data must be one of the semantic refusals above."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    detail = response.json().get("detail", "")
    if not SEMANTIC_REFUSALS.search(detail):
        raise AssertionError(f"a schema-valid request was refused: {detail}")
    return None


CHECKS = [
    not_a_server_error,
    negative_data_rejection,
    schemathesis.check(declared_limits_hold),
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


async def _populate(url: str) -> None:
    for project in ("alpha", "beta"):
        sluice = await open_sluice(url, project)
        try:
            await populate(sluice, project)
        finally:
            await sluice.close()


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`sluice serve` (no engine, so what is created stays put) over a populated store."""
    url = f"sqlite:///{tmp_path_factory.mktemp('schema') / 's.db'}"
    asyncio.run(_populate(url))
    env = {**os.environ, "SLUICE_DATABASE_URL": url, "SLUICE_PROJECT": "alpha"}
    command = ["serve", "--no-engine", "--no-schedules", "--port", "0"]
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluice", *command],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        serve.stdout.readline()
        match = re.search(r"HTTP API on (http://\S+)/api/v1", serve.stdout.readline())
        assert match
        yield match.group(1)
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0


@pytest.fixture(scope="module")
def live_schema(live_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{live_url}/api/v1/openapi.json")


def _fuzz(operation: schemathesis.APIOperation) -> str | None:
    """The first failure generated input finds in `operation`, or None."""

    @given(case=operation.as_strategy())
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS)

    try:
        check()
    except Exception as exc:  # every check failure, reported by operation below
        return f"{operation.label}: {exc}"
    return None


def test_every_operation_conforms_and_never_fails(live_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in live_schema.get_all_operations()]
    assert len(operations) >= 20  # the whole API, not an empty or truncated schema
    failures = [f for f in map(_fuzz, operations) if f is not None]
    assert not failures, "\n\n".join(failures)
