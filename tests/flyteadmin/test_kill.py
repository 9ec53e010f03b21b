"""SIGKILL `sluice serve` in the middle of a Flyte registration and right after it created an
execution (before it could answer), restart it on the same store, and let the client do what it
does next (register again, create again with the same name): every entity is whole, the
re-registration is a no-op for what was committed, and there is one execution."""

from __future__ import annotations

import hashlib
import signal
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import execution_pb2 as core_execution

from support.flyteadmin_server import FlyteServer, importable, start_server

KILLED = -signal.SIGKILL


def _entities(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        query = "SELECT resource_type, name, version, digest, spec, created_at FROM flyte_entities"
        return sorted(conn.execute(query).fetchall())


def _executions(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM executions")]


def _killed(server: FlyteServer) -> None:
    assert server.process.wait(timeout=60) == KILLED, server.log.read_text()


def test_a_killed_server_leaves_whole_entities_and_one_execution(
    tmp_path: Path, project: Path
) -> None:
    importable(project)
    from fa_flows.chain import pipeline

    home = tmp_path / "home"

    def register(server: FlyteServer) -> Any:
        return server.remote().register_script(
            pipeline, version="k1", source_path=str(project), module_name="fa_flows.chain"
        )

    # Killed inside the second entity's transaction: the first is committed, whole.
    first = start_server(home, kill_at="flyte.mid_register:2")
    with pytest.raises(Exception):  # noqa: B017 (whatever flytekit makes of a dead server)
        register(first)
    _killed(first)
    (kept,) = _entities(first.db)
    assert kept[3] == hashlib.sha256(kept[4]).hexdigest()

    # Registered again after a restart: the committed one untouched, the rest added; then
    # killed after creating an execution, before answering.
    second = start_server(home, kill_at="flyte.after_create")
    workflow = register(second)
    after = _entities(second.db)
    assert kept in after
    assert {(kind, name) for kind, name, *_ in after} == {
        ("task", "fa_flows.chain.double"),
        ("task", "fa_flows.chain.add"),
        ("task", "fa_flows.chain.describe"),
        ("workflow", "fa_flows.chain.pipeline"),
        ("launch_plan", "fa_flows.chain.pipeline"),
    }
    with pytest.raises(Exception):  # noqa: B017
        second.remote().execute(workflow, inputs={"x": 4}, execution_name="exactly-once")
    _killed(second)
    assert _executions(second.db) == ["exactly-once"]

    # The client creates it again under the same name: told it exists, it follows that one.
    third = start_server(home)
    try:
        remote = third.remote()
        register(third)
        assert _entities(third.db) == after  # a no-op: nothing rewritten
        execution = remote.execute(workflow, inputs={"x": 4}, execution_name="exactly-once")
        execution = remote.wait(execution, poll_interval=timedelta(seconds=0.5))
        assert execution.closure.phase == core_execution.WorkflowExecution.SUCCEEDED
        assert execution.outputs["o0"] == "total=12"
        assert _executions(third.db) == ["exactly-once"]
    finally:
        third.stop()
