"""Flyte's own clients against `sluice serve` (one real server, on loopback, for the module):
the real `pyflyte register` and `pyflyte run --remote` (with and without --wait), FlyteRemote
(register, execute, fetch, sync, wait, terminate, fetch outputs), and flytectl's calls (get
projects, executions, launch plans) through the same gRPC stubs, since flytectl (a Go binary)
cannot be installed here. What they launch are ordinary sluice executions: their outputs, logs,
cache entries and concurrency policies are sluice's."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    launch_plan_pb2,
    project_pb2,
    task_execution_pb2,
    task_pb2,
)
from flyteidl.core import execution_pb2 as core_execution
from flyteidl.core import identifier_pb2, literals_pb2
from flyteidl.service import admin_pb2_grpc

from support.flyteadmin_server import FlyteServer, importable

PROJECT, DOMAIN = "flytesnacks", "development"
SUCCEEDED, ABORTED = (
    core_execution.WorkflowExecution.SUCCEEDED,
    core_execution.WorkflowExecution.ABORTED,
)
POLL = timedelta(seconds=0.5)


@pytest.fixture(scope="module")
def registered(server: FlyteServer, project: Path) -> Any:
    """`pyflyte register` of the test flows at version v1, once for the module."""
    done = server.pyflyte("register", "--version", "v1", "fa_flows", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def admin(server: FlyteServer) -> admin_pb2_grpc.AdminServiceStub:
    """What flytectl calls: flyteadmin's AdminService stub on the server's endpoint."""
    return admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(server.endpoint))


def _rows(server: FlyteServer) -> list[tuple[Any, ...]]:
    import sqlite3

    with sqlite3.connect(server.db) as conn:
        query = "SELECT resource_type, name, version, digest, created_at FROM flyte_entities"
        return sorted(conn.execute(query).fetchall())


def _shown(server: FlyteServer, name: str) -> dict[str, Any]:
    found: dict[str, Any] = server.api(f"/executions/{name}")
    return found


def _ident(kind: int, name: str, version: str) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=kind, project=PROJECT, domain=DOMAIN, name=name, version=version
    )


def _until(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def test_pyflyte_register_registers_each_entity_once(
    server: FlyteServer, project: Path, registered: Any
) -> None:
    rows = _rows(server)
    names = {(kind, name) for kind, name, version, *_ in rows if version == "v1"}
    assert {
        ("task", "fa_flows.chain.double"),
        ("task", "fa_flows.chain.add"),
        ("task", "fa_flows.chain.describe"),
        ("workflow", "fa_flows.chain.pipeline"),
        ("launch_plan", "fa_flows.chain.pipeline"),
        ("launch_plan", "fa_flows.slow.one_at_a_time"),
    } <= names
    again = server.pyflyte("register", "--version", "v1", "fa_flows", cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _rows(server) == rows  # the same specs again: nothing written


def test_a_different_spec_under_a_registered_version_is_refused_naming_it(
    server: FlyteServer, registered: Any, admin: Any
) -> None:
    name = "fa_flows.chain.double"
    found = admin.GetTask(common_pb2.ObjectGetRequest(id=_ident(1, name, "v1")))
    changed = task_pb2.TaskSpec(template=found.closure.compiled_task.template)
    changed.template.metadata.retries.retries = 7
    rows = _rows(server)
    with pytest.raises(grpc.RpcError) as refused:
        admin.CreateTask(task_pb2.TaskCreateRequest(id=_ident(1, name, "v1"), spec=changed))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{name}@v1 is registered already with a different spec" in refused.value.details()
    assert _rows(server) == rows


def test_pyflyte_run_remote_wait_runs_a_sluice_execution(
    server: FlyteServer, project: Path
) -> None:
    done = server.pyflyte(
        "run", "--remote", "--wait", "--poll-interval", "1",
        "fa_flows/chain.py", "pipeline", "--x", "5", cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    name = re.search(r"Execution (\S+) has succeeded", done.stdout)
    assert name is not None, done.stdout
    shown = _shown(server, name.group(1))
    assert shown["phase"] == "SUCCEEDED"
    assert shown["outputs"] == {"o0": "total=15"}
    assert [n["node"] for n in shown["nodes"]] == ["n0", "n1", "n2"]
    logs = server.api(f"/executions/{name.group(1)}/nodes/n2/logs")
    assert "describing 15" in [line["text"] for line in logs["lines"]]


def test_pyflyte_run_remote_without_wait_returns_at_once(
    server: FlyteServer, project: Path
) -> None:
    done = server.pyflyte(
        "run", "--remote", "fa_flows/chain.py", "pipeline", "--x", "2", cwd=project
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has succeeded" not in done.stdout
    name = re.search(r"/executions/([a-z0-9-]+)", done.stdout)
    assert name is not None, done.stdout
    remote = server.remote()
    execution = remote.wait(remote.fetch_execution(name=name.group(1)), poll_interval=POLL)
    assert execution.closure.phase == SUCCEEDED
    assert execution.outputs["o0"] == "total=6"


def test_flyte_remote_registers_executes_fetches_syncs_and_reads_outputs(
    server: FlyteServer, project: Path
) -> None:
    importable(project)
    from fa_flows.chain import pipeline

    remote = server.remote()
    workflow = remote.register_script(
        pipeline, version="r1", source_path=str(project), module_name="fa_flows.chain"
    )
    execution = remote.execute(workflow, inputs={"x": 10}, execution_name="remote-chain")
    execution = remote.wait(execution, poll_interval=POLL)
    assert execution.closure.phase == SUCCEEDED
    assert execution.outputs["o0"] == "total=30"
    fetched = remote.sync(remote.fetch_execution(name="remote-chain"), sync_nodes=True)
    assert fetched.inputs["x"] == 10
    outputs = {node: run.outputs["o0"] for node, run in fetched.node_executions.items()}
    assert outputs == {"n0": 20, "n1": 30, "n2": "total=30"}
    again = remote.fetch_workflow(name="fa_flows.chain.pipeline", version="r1")
    assert list(again.interface.inputs) == ["x"]
    assert _shown(server, "remote-chain")["outputs"] == {"o0": "total=30"}
    _logs_are_sluices(server)


def test_flyte_remote_terminates_a_running_execution(server: FlyteServer, project: Path) -> None:
    importable(project)
    from fa_flows.slow import sleepy

    remote = server.remote()
    workflow = remote.register_script(
        sleepy, version="s1", source_path=str(project), module_name="fa_flows.slow"
    )
    execution = remote.execute(workflow, inputs={"seconds": 300.0}, execution_name="stop-me")
    _until(lambda: _node_phase(server, "stop-me", "n0") == "RUNNING")
    remote.terminate(execution, "not needed any more")
    execution = remote.wait(execution, poll_interval=POLL, timeout=timedelta(seconds=60))
    assert execution.closure.phase == ABORTED
    assert execution.closure.abort_metadata.cause == "not needed any more"
    assert _shown(server, "stop-me")["phase"] == "ABORTED"


def _node_phase(server: FlyteServer, name: str, node: str) -> str | None:
    found = {n["node"]: n["phase"] for n in _shown(server, name)["nodes"]}
    return found.get(node)


def test_edited_code_registered_again_runs_its_new_version(
    server: FlyteServer, tmp_path: Path
) -> None:
    """A worker that ran one registration's code imports a later one's afresh."""
    import importlib
    import sys

    source = "from flytekit import task\n\n@task\ndef answer() -> int:\n    return {}\n"
    remote = server.remote()
    for version, value in (("e1", 1), ("e2", 2)):
        root = tmp_path / version
        (root / "fa_edited").mkdir(parents=True)
        (root / "fa_edited" / "__init__.py").write_text("")
        (root / "fa_edited" / "answer.py").write_text(source.format(value))
        for name in ("fa_edited", "fa_edited.answer"):
            sys.modules.pop(name, None)
        sys.path.insert(0, str(root))
        try:
            module = importlib.import_module("fa_edited.answer")
        finally:
            sys.path.remove(str(root))
        task = remote.register_script(
            module.answer, version=version, source_path=str(root), module_name="fa_edited.answer"
        )
        execution = remote.wait(remote.execute(task, inputs={}), poll_interval=POLL)
        assert execution.outputs["o0"] == value


def test_flytectl_get_projects_executions_and_launch_plans(
    server: FlyteServer, registered: Any, admin: Any
) -> None:
    projects = admin.ListProjects(project_pb2.ProjectListRequest(limit=100))
    found = {p.id: [d.id for d in p.domains] for p in projects.projects}
    assert "development" in found[PROJECT]
    created = admin.CreateExecution(_create("listed-one", "fa_flows.chain.pipeline", x=1))
    assert created.id.name == "listed-one"
    named = common_pb2.NamedEntityIdentifier(project=PROJECT, domain=DOMAIN)
    newest_first = common_pb2.Sort(key="created_at", direction=common_pb2.Sort.DESCENDING)
    listing = common_pb2.ResourceListRequest(id=named, limit=100, sort_by=newest_first)
    executions = admin.ListExecutions(listing)
    assert executions.executions[0].id.name == "listed-one"
    assert executions.executions[0].spec.launch_plan.name == "fa_flows.chain.pipeline"
    plans = admin.ListLaunchPlans(listing)
    assert {"fa_flows.chain.pipeline", "fa_flows.slow.hourly"} <= {
        p.id.name for p in plans.launch_plans
    }
    ids = admin.ListLaunchPlanIds(common_pb2.NamedEntityIdentifierListRequest(
        project=PROJECT, domain=DOMAIN, limit=100))  # fmt: skip
    assert "fa_flows.slow.one_at_a_time" in {e.name for e in ids.entities}


def _create(name: str, launch_plan: str, **inputs: Any) -> execution_pb2.ExecutionCreateRequest:
    literals = literals_pb2.LiteralMap()
    for key, value in inputs.items():
        primitive = literals_pb2.Primitive()
        if isinstance(value, float):
            primitive.float_value = value
        else:
            primitive.integer = value
        literals.literals[key].scalar.primitive.CopyFrom(primitive)
    spec = execution_pb2.ExecutionSpec(launch_plan=_ident(3, launch_plan, "v1"))
    return execution_pb2.ExecutionCreateRequest(
        project=PROJECT, domain=DOMAIN, name=name, spec=spec, inputs=literals
    )


def _plans(server: FlyteServer) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = server.api(f"/launch-plans?project={PROJECT}&domain={DOMAIN}")
    return found


def test_activating_a_scheduled_launch_plan_schedules_it_in_sluice(
    server: FlyteServer, registered: Any, admin: Any
) -> None:
    plan = _ident(3, "fa_flows.slow.hourly", "v1")
    admin.UpdateLaunchPlan(
        launch_plan_pb2.LaunchPlanUpdateRequest(id=plan, state=launch_plan_pb2.ACTIVE)
    )
    named = common_pb2.NamedEntityIdentifier(project=PROJECT, domain=DOMAIN, name=plan.name)
    active = admin.GetActiveLaunchPlan(launch_plan_pb2.ActiveLaunchPlanRequest(id=named))
    assert active.id.version == "v1" and active.closure.state == launch_plan_pb2.ACTIVE
    listed = _plans(server)
    mine = [p for p in listed if p["name"] == plan.name and p["state"] == "ACTIVE"]
    assert len(mine) == 1 and mine[0]["schedule"]["fixed_rate"] == 3600.0
    assert len(mine[0]["next_firings"]) == 5
    admin.UpdateLaunchPlan(
        launch_plan_pb2.LaunchPlanUpdateRequest(id=plan, state=launch_plan_pb2.INACTIVE)
    )
    listed = _plans(server)
    assert not [p for p in listed if p["name"] == plan.name and p["state"] == "ACTIVE"]
    with pytest.raises(grpc.RpcError) as none:
        admin.GetActiveLaunchPlan(launch_plan_pb2.ActiveLaunchPlanRequest(id=named))
    assert none.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_flyte_concurrency_policy_and_the_cache_are_sluices(
    server: FlyteServer, registered: Any, admin: Any
) -> None:
    plan = _ident(3, "fa_flows.slow.one_at_a_time", "v1")
    admin.UpdateLaunchPlan(
        launch_plan_pb2.LaunchPlanUpdateRequest(id=plan, state=launch_plan_pb2.ACTIVE)
    )
    admin.CreateExecution(_create("first-of-two", plan.name, seconds=300.0))
    admin.CreateExecution(_create("second-of-two", plan.name, seconds=300.0))
    remote = server.remote()
    second = remote.wait(remote.fetch_execution(name="second-of-two"), poll_interval=POLL)
    assert second.closure.phase == ABORTED  # SKIPPED by the policy: Flyte has no such phase
    assert _shown(server, "second-of-two")["phase"] == "SKIPPED"
    assert "first-of-two" in second.closure.abort_metadata.cause
    remote.terminate(remote.fetch_execution(name="first-of-two"), "done")
    for name in ("cached-1", "cached-2"):
        admin.CreateExecution(_create(name, "fa_flows.slow.cached", x=6))
        done = remote.wait(remote.fetch_execution(name=name), poll_interval=POLL)
        assert done.outputs["o0"] == 36
    assert [n["cache_status"] for n in _shown(server, "cached-2")["nodes"]] == ["HIT"]


def _logs_are_sluices(server: FlyteServer) -> None:
    """A node's task execution names its log: sluice's HTTP API page of it."""
    admin = admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(server.endpoint))
    node = identifier_pb2.NodeExecutionIdentifier(
        node_id="n2",
        execution_id=identifier_pb2.WorkflowExecutionIdentifier(
            project=PROJECT, domain=DOMAIN, name="remote-chain"
        ),
    )
    attempts = admin.ListTaskExecutions(
        task_execution_pb2.TaskExecutionListRequest(node_execution_id=node)
    )
    (attempt,) = attempts.task_executions
    assert attempt.closure.phase == core_execution.TaskExecution.SUCCEEDED
    with urllib.request.urlopen(attempt.closure.logs[0].uri, timeout=30) as answer:
        page = json.loads(answer.read())
    assert "describing 30" in [line["text"] for line in page["lines"]]
