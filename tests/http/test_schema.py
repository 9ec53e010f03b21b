"""Schemathesis against the live schema of a running `sluice serve`: every documented
operation, with generated valid and invalid input, never answers 500, and every response
(status, content type, body, headers) is one the schema documents. Bounded: a few examples
per operation, so the whole run takes well under a minute."""

from __future__ import annotations

import asyncio
import copy
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
            # A backfill's range against its plan's schedule and the clock; its state moves.
            r"has no schedule to backfill",
            r"the range holds .* split it",
            r"start must not be after its end",
            r"its end is in the future",
            r"^backfill \S+ is [A-Z]+: only a",
            # A gate's state; a signal's value against the type the gate waits for.
            r"is not a gate$",
            r"is a sleep: it waits for no signal",
            r"not waiting for a signal$",
            r"was signalled already$",
            r"^signal for ",
            # A rate's numbers against each other (the syntax is the schema's pattern).
            r"^rate limit .*(unknown period|the count must|burst)",
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


STATEFUL_EXAMPLES = 6
STEPS = 5


def test_stateful_links_conform_and_never_fail(
    live_schema: schemathesis.BaseSchema, live_url: str
) -> None:
    """Sequences that follow the schema's links (create or relaunch an execution, then read,
    list the nodes and events of, abort or relaunch what was created) with the same checks:
    no 5xx, no answer outside the schema, no schema-valid request refused. Bounded: a few
    sequences of a few steps."""
    links = [
        (path, method)
        for path, ops in live_schema.raw_schema["paths"].items()
        for method, op in ops.items()
        for answer in op.get("responses", {}).values()
        if answer.get("links")
    ]
    assert len(links) >= 3, links  # create, relaunch, retry link to what can follow
    machine = _creating_real_executions(live_schema, live_url).as_state_machine()

    called: list[tuple[str, int]] = []

    class Checked(machine):  # type: ignore[misc, valid-type]
        def validate_response(self, response: Any, case: schemathesis.Case, **_: Any) -> None:
            called.append((case.operation.label, response.status_code))
            case.validate_response(response, checks=CHECKS)

    Checked.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )
    followed = {label for label, status in called if "{execution_id}" in label and status < 300}
    assert len(followed) >= 2, f"links were not followed to an execution: {called}"


def _creating_real_executions(
    schema: schemathesis.BaseSchema, base_url: str
) -> schemathesis.BaseSchema:
    """The operations on executions, creation narrowed to launch plans the store has (a
    random name is a 404, and nothing would follow): sequences start from a real execution
    and follow the links from it (the other operations are fuzzed one by one above)."""
    raw = copy.deepcopy(schema.raw_schema)
    create = raw["components"]["schemas"]["CreateExecution"]
    create["properties"]["launch_plan"] = {"type": "string", "enum": ["echo_plan", "waiting_plan"]}
    create["properties"]["inputs"] = {"type": "object", "maxProperties": 0}
    create["properties"]["project"] = {"type": "string", "enum": ["alpha"]}
    create["properties"]["domain"] = {"type": "string", "enum": ["development"]}
    create["required"] = ["launch_plan", "project", "domain"]
    linked = {
        f"/api/v1/executions{tail}"
        for tail in ("", "/{execution_id}", "/{execution_id}/nodes", "/{execution_id}/events")
    } | {f"/api/v1/executions/{{execution_id}}/{verb}" for verb in ("abort", "relaunch")}
    raw["paths"] = {path: ops for path, ops in raw["paths"].items() if path in linked}
    raw["paths"]["/api/v1/executions"].pop("get")  # sequences start by creating one
    narrowed = schemathesis.openapi.from_dict(raw)
    narrowed.config.update(base_url=base_url)
    return narrowed
