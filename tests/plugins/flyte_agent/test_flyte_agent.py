"""flytekit tasks of agent types run by sluice's flyte_agent plugins against a real agent
server (`pyflyte serve agent`): the async protocol (CreateTask once, GetTask polls, DeleteTask
on abort) and the sync one (ExecuteTaskSync), the web-API machinery's quotas, resume after a
SIGKILL of `sluice run` (the agent's resource meta in the plugin state: one create in all),
and abort. The agent side logs every call to a ledger the tests read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.crash import env, kill_9_when, only_outputs, query, resume_until_succeeded, sluice
from support.crash import wait as wait_until

HERE = Path(__file__).resolve().parent
FLOWS = HERE / "agent_flows.py"


def _execution(db: Path) -> str:
    ((found,),) = query(db, "SELECT id FROM executions")
    return str(found)


def _meta_stored(db: Path) -> bool:
    """The countdown node's plugin state holds the agent's resource meta."""
    rows = query(db, "SELECT plugin_state FROM node_executions WHERE node_id = 'n0'")
    return bool(rows) and "resource_meta" in str(rows[0][0])


def test_async_and_sync_agents_run_under_the_quota_and_feed_downstream(
    agent_server, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    config = agent_server.config(tmp_path / "sluice.toml", countdown=1)
    done = subprocess.run(
        [sys.executable, "-m", "sluice", "run", f"{FLOWS}:suite", "--input", "text=quiet"],
        env=env(db, 1, config=config),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert only_outputs(db) == {"o0": 2, "o1": 4, "o2": "QUIET", "o3": 5}
    execution = _execution(db)
    first, second = agent_server.entries("create", execution=execution)
    # a quota of one countdown job: the second was created once the first had ended
    assert second["at"] >= first["at"] + first["seconds"]
    assert [e["text"] for e in agent_server.entries("do", text="quiet")] == ["quiet"]


def test_a_killed_run_resumes_polling_the_job_it_created(agent_server, tmp_path: Path) -> None:
    db, config = tmp_path / "s.db", agent_server.config(tmp_path / "sluice.toml")
    args = ["run", f"{FLOWS}:long_countdown", "--input", "seconds=4"]
    run = sluice(args, db, 1, config=config, stderr=tmp_path / "run.err", cwd=tmp_path)
    kill_9_when(run, lambda: _meta_stored(db), timeout=120)
    resume_until_succeeded(db, 1, config=config, stderr=tmp_path / "engine.err", cwd=tmp_path)
    assert only_outputs(db) == {"o0": 6}
    creates = agent_server.entries("create", execution=_execution(db))
    assert len(creates) == 1  # never a second create


def test_abort_deletes_the_agents_job(agent_server, tmp_path: Path) -> None:
    db, config = tmp_path / "s.db", agent_server.config(tmp_path / "sluice.toml")
    args = ["run", f"{FLOWS}:long_countdown", "--input", "seconds=600"]
    run = sluice(args, db, 1, config=config, stderr=tmp_path / "run.err", cwd=tmp_path)
    try:
        wait_until(lambda: _meta_stored(db), timeout=120)
        execution = _execution(db)
        aborted = subprocess.run(
            [sys.executable, "-m", "sluice", "executions", "abort", execution],
            env=env(db, 1, config=config),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert aborted.returncode == 0, aborted.stderr
        run.wait(timeout=60)
        assert query(db, "SELECT phase FROM executions") == [("ABORTED",)]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
    (created,) = agent_server.entries("create", execution=execution)
    assert [e["job"] for e in agent_server.entries("delete")] == [created["job"]]
