"""Bad input anywhere (definitions, launches, config, the CLI) is a clear error naming the
value, never a raw pydantic dump or a deep traceback, and leaves the store as it was.

Also: a launch whose claims could never be granted (more units than the quota, a lock rule
of capacity 0, lock names that cannot be computed) is refused before anything is written,
instead of waiting forever.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

import sluice
from sluice.config import Settings, load_config
from sluice.errors import (
    ClaimNeverFitsError,
    ConfigError,
    DefinitionError,
    InputError,
    InvalidArgumentError,
    InvalidPolicyError,
    InvalidQuotaError,
)
from sluice.executions.launch import create_execution
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


@sluice.workflow
def big_flow(n: int) -> int:
    return big_query(n=n)  # type: ignore[no-any-return]


big_plan = sluice.LaunchPlan("big_plan", big_flow, default_inputs={"n": 1})
big_nightly = sluice.LaunchPlan(
    "big_nightly", big_flow, default_inputs={"n": 1}, schedule=sluice.Schedule(cron="0 3 * * *")
)


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


# --- the sweep: every bad value is a clear error naming it ------------------------------------

SETTINGS = hypothesis.settings(
    max_examples=30, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
SEPARATORS = st.sampled_from(["/", ":", "\x00", "\n", " ", "@", "\t", "é"])
WORD = st.text(alphabet="abcxyz_-.", min_size=0, max_size=4)
BAD_NAMES = st.one_of(
    st.builds(lambda a, sep, b: f"x{a}{sep}{b}", WORD, SEPARATORS, WORD),
    st.integers(min_value=256, max_value=5000).map(lambda n: "n" * n),
    st.sampled_from(["", "-leading", ".hidden", None, 3, b"bytes", ["list"]]),
)
BAD_SCOPES = st.one_of(BAD_NAMES, st.sampled_from(["a.b", "x<y>", "_under"]))
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
BAD_SECONDS = st.one_of(NON_FINITE, st.sampled_from([0, -1, -0.5, True, "1", [1.0], 1e300, 10**30]))
BAD_COUNTS = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=10**9 + 1),
    st.sampled_from([1.5, math.nan, math.inf, "3", True, None, [1]]),
)
BAD_PRIORITIES = st.one_of(
    st.integers(min_value=10**6 + 1),
    st.integers(max_value=-(10**6) - 1),
    st.sampled_from([0.5, math.nan, math.inf, "1", None]),
)


def clear(caught: pytest.ExceptionInfo[BaseException], value: object) -> str:
    """The error is one line naming the value, with no pydantic dump."""
    message = str(caught.value)
    assert "\n" not in message, message
    assert "pydantic" not in message and "validation error" not in message, message
    text = repr(value)
    named = text if len(text) <= 80 else f"{len(value) if isinstance(value, str) else ''}"
    assert named in message, (named, message)
    return message


def plain(a: int) -> int:
    return a


@sluice.workflow
def plain_flow(a: int) -> int:
    return sluice_plain(a=a)  # type: ignore[no-any-return]


sluice_plain = sluice.task(name="bad_input.plain")(plain)


@SETTINGS
@hypothesis.given(name=BAD_NAMES)
def test_bad_task_workflow_and_launch_plan_names(name: Any) -> None:
    if name is not None:  # None names a task or workflow after its function
        with pytest.raises(DefinitionError) as caught:
            sluice.task(name=name)(plain)
        clear(caught, name)
        with pytest.raises(DefinitionError) as caught:
            sluice.workflow(name=name)(plain)
        clear(caught, name)
    with pytest.raises(DefinitionError) as caught:
        sluice.LaunchPlan(name, plain_flow)
    clear(caught, name)


@SETTINGS
@hypothesis.given(name=BAD_NAMES.filter(lambda v: not (isinstance(v, str) and _namespace_like(v))))
def test_bad_quota_namespaces(name: Any) -> None:
    with pytest.raises(InvalidQuotaError) as caught:
        sluice.Quota(name)
    clear(caught, name)


def _namespace_like(name: str) -> bool:
    """`/` and `:` are allowed in quota namespaces (`plugin:namespace`, `db/warehouse`)."""
    return all(c.isascii() and (c.isalnum() or c in "_.-/:") for c in name) and name[:1] not in (
        "-",
        ".",
        "/",
        ":",
    )


@SETTINGS
@hypothesis.given(name=BAD_SCOPES.filter(lambda v: not isinstance(v, bytes)))
def test_bad_project_and_domain_in_config(name: Any) -> None:
    for key in ("project", "domain"):
        with pytest.raises(ConfigError) as caught:
            load_config(**{key: name})
        message = str(caught.value)
        assert key in message and "\n" not in message and "pydantic" not in message, message


@SETTINGS
@hypothesis.given(template=st.sampled_from(["a\x00", "a\nb", "x" * 300, "", "   "]))
def test_bad_lock_templates(template: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        sluice.task(locks=template)(plain)
    assert "locks" in str(caught.value) and "\n" not in str(caught.value)


@SETTINGS
@hypothesis.given(seconds=BAD_SECONDS)
def test_bad_seconds(seconds: Any) -> None:
    with pytest.raises(DefinitionError) as caught:
        sluice.task(timeout=seconds)(plain)
    clear(caught, seconds)
    with pytest.raises(DefinitionError) as caught:
        sluice.task(cache=sluice.Cache(version="1", max_age=seconds))(plain)
    clear(caught, seconds)
    with pytest.raises(InvalidPolicyError) as caught:
        sluice.Schedule(fixed_rate=seconds)
    clear(caught, seconds)


@SETTINGS
@hypothesis.given(
    value=st.one_of(NON_FINITE, st.sampled_from([0, -1.0, "soon", 1e300])),
    key=st.sampled_from(
        [
            ("engine", "resync_interval"),
            ("engine", "execution_lease"),
            ("engine", "starvation_bound"),
            ("resources", "lease"),
            ("cache", "heartbeat_interval"),
        ]
    ),
)
def test_bad_intervals_in_config(value: Any, key: tuple[str, str]) -> None:
    section, name = key
    with pytest.raises(ConfigError) as caught:
        load_config(**{section: {name: value}})
    message = str(caught.value)
    assert f"{section}.{name}" in message and "\n" not in message, message


@SETTINGS
@hypothesis.given(count=BAD_COUNTS)
def test_bad_counts_and_caps(count: Any) -> None:
    with pytest.raises(DefinitionError) as caught:
        sluice.task(retries=count)(plain)
    clear(caught, count)
    with pytest.raises(InvalidPolicyError) as caught:
        sluice.ConcurrencyPolicy(max=count)
    clear(caught, count)
    if count is not None:
        with pytest.raises(InvalidPolicyError) as caught:
            sluice.ConcurrencyPolicy(max=1, max_pending=count)
        clear(caught, count)
        with pytest.raises(InvalidPolicyError) as caught:
            sluice.Schedule(fixed_rate=60, catch_up_max=count)
        clear(caught, count)
    with pytest.raises(InvalidQuotaError) as caught:
        sluice.Quota("hive", units=count)
    clear(caught, count)
    if isinstance(count, str):
        return  # config reads strings from the environment: "3" is 3 there
    for section, name in [("engine", "parallelism"), ("concurrency", "catch_up_max")]:
        with pytest.raises(ConfigError) as caught:
            load_config(**{section: {name: count}})
        assert f"{section}.{name}" in str(caught.value)


@SETTINGS
@hypothesis.given(priority=BAD_PRIORITIES)
def test_bad_priorities(priority: Any) -> None:
    with pytest.raises(DefinitionError) as caught:
        sluice.task(priority=priority)(plain)
    clear(caught, priority)
    with pytest.raises(DefinitionError) as caught:
        sluice.LaunchPlan("plan", plain_flow, priority=priority)
    clear(caught, priority)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: sluice.task(type="")(plain), "type"),
        (lambda: sluice.task(type=3)(plain), "type"),
        (lambda: sluice.task(custom="x")(plain), "custom"),
        (lambda: sluice.task(custom={"rate": math.nan})(plain), "custom"),
        (lambda: sluice.task(custom={"f": object()})(plain), "custom"),
        (lambda: sluice.task(interruptible="yes")(plain), "interruptible"),
        (lambda: sluice.task(cache=sluice.Cache(version=3))(plain), "version"),  # type: ignore[arg-type]
        (lambda: sluice.Locks(3), "template"),  # type: ignore[arg-type]
        (lambda: sluice.Schedule(cron=5), "cron"),  # type: ignore[arg-type]
        (lambda: sluice.Schedule(cron="* * * * *", timezone=None), "timezone"),  # type: ignore[arg-type]
        (lambda: sluice.ConcurrencyPolicy(max=1, behavior=3), "behavior"),  # type: ignore[arg-type]
        (lambda: sluice.LaunchPlan("plan", plain_flow, overwrite_cache="no"), "overwrite_cache"),  # type: ignore[arg-type]
        (lambda: sluice.LaunchPlan("plan", plain_flow, default_inputs={"a": "x"}).spec, "'a'"),
        (lambda: sluice.LaunchPlan("plan", plain_flow, fixed_inputs=[1]).spec, "fixed_inputs"),  # type: ignore[arg-type]
    ],
)
def test_wrong_types_are_named(build: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build()
    message = str(caught.value)
    assert fragment in message and "\n" not in message and "pydantic" not in message, message


@sluice.task
def sink(value: list) -> None:  # type: ignore[type-arg]
    return None


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [nested(5000), [{"k": nested(3000)}], [object()], [{1: "int key"}], [math.nan], [{"x"}]],
    ids=["deep", "deep-dict", "object", "int-key", "nan", "set"],
)
async def test_bad_json_inputs_are_refused_and_nothing_is_written(rt: Runtime, value: Any) -> None:
    message = await refused(rt, sink, {"value": value})
    assert "'value'" in message and len(message) < 500, message


BAD_LAUNCH_NAMES = ["a/b", "a:b", "a\x00b", "x" * 3000, "", "a b"]


@pytest.mark.parametrize("name", BAD_LAUNCH_NAMES, ids=range(len(BAD_LAUNCH_NAMES)))
async def test_bad_names_at_launch_write_nothing(rt: Runtime, name: str) -> None:
    if name:  # the runtime reads "" as "the configured project"
        for key in ("project", "domain"):
            message = await refused(rt, sink, {"value": []}, **{key: name})
            assert key in message, message
    wf = task_workflow(sink)
    before = rows(rt.settings.database_url)
    for scope, workflow in [
        ({"project": name, "domain": "d"}, wf),
        ({"project": "p", "domain": name}, wf),
        ({"project": "p", "domain": "d"}, wf.model_copy(update={"name": name})),
    ]:
        with pytest.raises(InputError):
            await create_execution(
                rt.store, None, rt.clock, workflow=workflow, inputs={"value": []}, **scope
            )
    assert rows(rt.settings.database_url) == before


async def test_a_registration_with_bad_names_writes_nothing(rt: Runtime) -> None:
    from sluice.executions.launch_plans import LaunchPlanService

    spec, workflow = big_plan.spec, big_flow.spec
    before = rows(rt.settings.database_url)
    for project, plan, flow in [
        ("a/b", spec, workflow),
        ("p", spec.model_copy(update={"name": "x:y"}), workflow),
        ("p", spec, workflow.model_copy(update={"name": "w\x00"})),
    ]:
        service = LaunchPlanService(rt.store, None, rt.clock, project, "d")
        with pytest.raises(InvalidArgumentError):
            await service.register(plan, flow)
    assert rows(rt.settings.database_url) == before


# --- the CLI: one line, exit 2, nothing written ------------------------------------------------

HERE = Path(__file__).resolve()


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--project", "a/b", "run", f"{HERE}:sink", "--inputs", '{"value": []}'], "'a/b'"),
        (["--domain", "x" * 3000, "run", f"{HERE}:sink", "--inputs", '{"value": []}'], "3000"),
        (["run", f"{HERE}:sink", "--inputs", "[" * 100_000 + "]" * 100_000], "--inputs"),
        (["run", f"{HERE}:sink", "--inputs", '{"value": [NaN]}'], "NaN"),
        (["run", f"{HERE}:plain_flow", "--input", "a=" + "9" * 5000], "'a'"),
        (["run", f"{HERE}:big_query", "--input", "n=1"], "'hive'"),
        (["run", f"{HERE}:big_plan"], "'hive'"),
        (["launchplan", "register", f"{HERE}:big_flow"], "not a LaunchPlan"),
        (["launchplan", "register", f"{HERE}:big_nightly"], "'hive'"),
        (["quota", "set", "bad\x00name", "3"], "bad"),
        (["quota", "set", "hive", str(10**30)], str(10**30)),
        (["quota", "set", "hive", "0"], "0"),
        (["concurrency", "caps", "set", "p", str(10**30)], str(10**30)),
        (["concurrency", "caps", "set", "a:b/c", "3"], "a:b"),
        (["executions", "ls", "--limit", str(10**30)], "limit"),
        (["cache", "ls", "--limit", str(10**30)], "limit"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, args: list[str], culprit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from sluice.cli.main import cli

    db = tmp_path / "s.db"
    monkeypatch.setenv("SLUICE_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("SLUICE_RESOURCES__QUOTAS", '{"hive": 2}')
    monkeypatch.setenv("SLUICE_ENGINE__WORKERS", "2")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.strip().splitlines() if line]
    assert len(lines) == 1 and culprit in lines[0], result.output
    assert "Traceback" not in result.output
    assert not rows(f"sqlite:///{db}").get("executions")
    assert not rows(f"sqlite:///{db}").get("launch_plans")


async def test_the_python_api_refuses_a_launch_plan_before_registering_it(sqlite_url: str) -> None:
    from sluice.api import run_async

    settings = load_config(database_url=sqlite_url, resources={"quotas": {"hive": 2}})
    with pytest.raises(ClaimNeverFitsError):
        await run_async(big_plan, {}, settings)
    assert not rows(sqlite_url).get("launch_plans"), "nothing registered for a refused launch"


@pytest.mark.parametrize(
    "args",
    [
        ["launchplan", "activate", "a\x00b"],
        ["launchplan", "deactivate", "a\x00b"],
        ["launchplan", "ls", "--name", "a\x00b"],
        ["executions", "create", "a\x00b"],
        ["cache", "ls", "--task", "a\x00b"],
        ["cache", "rm", "--task", "a\x00b"],
    ],
)
def test_cli_names_with_nul_are_refused_before_postgresql_sees_them(
    pg_url: str, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from sluice.cli.main import cli

    monkeypatch.setenv("SLUICE_DATABASE_URL", pg_url)
    assert CliRunner().invoke(cli, ["db", "upgrade"]).exit_code == 0
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.strip().splitlines() if line]
    assert len(lines) == 1 and "'a\\x00b'" in lines[0], result.output
