"""Bad input anywhere (definitions, launches, config, the CLI) is a clear error naming the
value, never a raw pydantic dump or a deep traceback, and leaves the store as it was.

Also: a launch whose claims could never be granted (more units than the quota, a lock rule
of capacity 0, lock names that cannot be computed) is refused before anything is written,
instead of waiting forever.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.concurrency.launch import create_execution
from sluice.config import Settings, load_config
from sluice.errors import ClaimNeverFitsError, InputError, InvalidArgumentError
from sluice.runtime import Runtime
from sluice.sdk.workflow import task_workflow
from sluice.spec.models import LockSpec

TABLES = ("task_specs", "workflow_specs", "launch_plans", "executions", "node_executions", "events")


@sluice.task(quotas=[sluice.Quota("hive", units=5)])
def big_query(n: int) -> int:
    return n


@sluice.task(locks="db/{table}")
def write_table(table: str) -> None:
    return None


@sluice.task(locks=sluice.Locks("db/partition/{item}", for_each="parts"))
def write_parts(parts: list[str]) -> None:
    return None


@sluice.task(locks="{name}")
def named_lock(name: str) -> None:
    return None


@sluice.task
def table_name(n: int) -> str:
    return f"t{n}"


@sluice.workflow
def upstream_locks(n: int) -> None:
    write_table(table=table_name(n=n))


def rows(url: str) -> dict[str, int]:
    path = url.removeprefix("sqlite:///")
    if not Path(path).exists():
        return {}
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


async def opened(settings: Settings) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(settings)
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
async def rt(sqlite_url: str) -> AsyncIterator[Runtime]:
    settings = load_config(database_url=sqlite_url, resources={"quotas": {"hive": 2}})
    async for runtime in opened(settings):
        yield runtime


async def refused(rt: Runtime, target: Any, inputs: dict[str, Any], **kw: Any) -> str:
    url = rt.settings.database_url
    before = rows(url)
    with pytest.raises(InvalidArgumentError) as caught:
        await rt.launch(target, inputs, **kw)
    assert rows(url) == before, "a refused launch writes nothing"
    message = str(caught.value)
    assert "\n" not in message and "pydantic" not in message, message
    return message


# --- claims that could never be granted are refused at launch ----------------------------------


async def test_a_claim_larger_than_the_configured_quota_is_refused(rt: Runtime) -> None:
    with pytest.raises(ClaimNeverFitsError):
        await rt.launch(big_query, {"n": 1})
    message = await refused(rt, big_query, {"n": 1})
    for fragment in ("big_query", "'hive'", "5", "2", "default"):
        assert fragment in message, (fragment, message)


async def test_a_claim_larger_than_the_operators_quota_is_refused(sqlite_url: str) -> None:
    async for rt in opened(load_config(database_url=sqlite_url)):
        await rt.resources.start()
        await rt.resources.set_quota("hive", 3)
        message = await refused(rt, big_query, {"n": 1})
        assert "'hive'" in message and "5" in message and "3" in message, message


async def test_a_claim_that_fits_is_launched(sqlite_url: str) -> None:
    async for rt in opened(load_config(database_url=sqlite_url, resources={"quotas": {"hive": 5}})):
        record = await rt.launch(big_query, {"n": 1})
        assert rows(sqlite_url)["executions"] == 1 and record.id


async def test_a_lock_rule_of_capacity_zero_is_refused_at_launch(rt: Runtime) -> None:
    rt.settings.resources.lock_rules["db/*"] = 0  # config refuses it; a caller may bypass that
    message = await refused(rt, write_table, {"table": "users"})
    for fragment in ("write_table", "'db/users'", "'db/*'", "0"):
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize(
    ("target", "inputs", "fragments"),
    [
        (write_table, {"table": "a\x00b"}, ["write_table", "control"]),
        (write_table, {"table": "x" * 400}, ["write_table", "255"]),
        (named_lock, {"name": ""}, ["named_lock", "empty"]),
        (write_parts, {"parts": ["ok", "bad\nname"]}, ["write_parts", "control"]),
    ],
)
async def test_lock_names_known_at_launch_are_checked(
    rt: Runtime, target: Any, inputs: dict[str, Any], fragments: list[str]
) -> None:
    message = await refused(rt, target, inputs)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


async def test_a_stored_spec_whose_template_cannot_be_filled_is_refused(rt: Runtime) -> None:
    spec = write_table.spec
    broken = spec.model_copy(
        update={"claims": spec.claims.model_copy(update={"locks": (LockSpec(template="{nope}"),)})}
    )
    wf = task_workflow(write_table)
    wf = wf.model_copy(update={"tasks": {key: broken for key in wf.tasks}})
    before = rows(rt.settings.database_url)
    with pytest.raises(InvalidArgumentError) as caught:
        await create_execution(
            rt.store, None, rt.clock, project="p", domain="d", workflow=wf, inputs={"table": "t"}
        )
    assert "'nope'" in str(caught.value) and "write_table" in str(caught.value)
    assert rows(rt.settings.database_url) == before


async def test_lock_names_from_upstream_outputs_are_left_to_the_engine(rt: Runtime) -> None:
    record = await rt.launch(upstream_locks, {"n": 1})
    assert record.id and rows(rt.settings.database_url)["executions"] == 1


async def test_bad_project_and_domain_at_launch_are_refused(rt: Runtime) -> None:
    message = await refused(rt, write_table, {"table": "t"}, project="a/b")
    assert "project" in message and "'a/b'" in message
    message = await refused(rt, write_table, {"table": "t"}, domain="x" * 5000)
    assert "domain" in message and "5000 characters" in message


def test_claim_never_fits_is_an_input_error() -> None:
    assert issubclass(ClaimNeverFitsError, InputError)
