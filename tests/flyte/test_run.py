"""`sluice run module.py:wf` on flytekit workflows, end to end with the real flytekit: tasks run
through flytekit's entrypoint in sluice's long-lived workers, values cross as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from support.flyte import CHAIN, history, sluice


def _run(
    db: Path, target: str, *args: str, work: Path | None = None, cwd: Path | None = None
) -> tuple[int, dict]:
    done = sluice(db, "run", f"{CHAIN}:{target}", "--json", *args, work=work, cwd=cwd)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {
        "stderr": done.stderr
    }


def test_a_workflow_runs_with_promises_constants_and_inputs(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "plain", "--input", "a=2")
    assert code == 0, found
    assert found["outputs"] == {"o0": 4.5}  # 2 + (2 + 0.5): the default of b, then a promise
    assert [n["node"] for n in found["nodes"]] == ["n0", "n1"]


def test_a_cached_workflow_run_twice_hits_the_cache_for_every_task(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    first_code, first = _run(db, "cached", "--input", "x=5", work=work)
    second_code, second = _run(db, "cached", "--input", "x=5", work=work)
    assert (first_code, second_code) == (0, 0), (first, second)
    assert first["outputs"] == second["outputs"] == {"o0": {"N=10": 11}}
    assert [n["cache_status"] for n in first["nodes"]] == ["POPULATED"] * 3
    assert [n["cache_status"] for n in second["nodes"]] == ["HIT"] * 3
    assert history(work) == ["double", "describe", "shout"]  # each body ran once


def test_a_recoverable_failure_is_retried_then_fails_with_the_user_error(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "failing", work=work)
    assert code != 0
    assert found["phase"] == "FAILED"
    node = found["nodes"][0]
    assert len(node["attempts"]) == 3  # retries=2
    assert "flaky failed on 1" in node["error"]["message"]
    assert node["error"]["kind"] == "USER"
    assert history(work) == ["flaky"] * 3


def test_a_non_recoverable_failure_fails_at_once(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "failing_at_once", work=work)
    assert code != 0
    node = found["nodes"][0]
    assert len(node["attempts"]) == 1  # flytekit reports it NON_RECOVERABLE: no retry
    assert "ValueError: broken on 1" in node["error"]["message"]
    assert history(work) == ["broken"]


def test_a_flytekit_task_runs_alone(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "add", "--input", "a=1", "--input", "b=0.25")
    assert code == 0, found
    assert found["outputs"] == {"o0": 1.25}


def test_a_file_crosses_by_reference_through_the_store_data_directory(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "files", "-i", "text=hi")
    assert code == 0, found
    assert found["outputs"] == {"o0": "hi"}
    reference = found["nodes"][0]["outputs"]["o0"]["path"]
    assert reference.startswith(str(tmp_path / "flyte"))  # raw outputs under the data dir
    assert Path(reference).read_text() == "hi"


LONE_MODULE = """
from flytekit import task, workflow

@task
def twice(x: int) -> int:
    return 2 * x

@workflow
def lone(x: int = 4) -> int:
    return twice(x=twice(x=x))
"""


def test_a_module_whose_name_is_taken_runs_under_its_private_name(tmp_path: Path) -> None:
    # A module outside any package, run from its own directory: its stem is importable there,
    # so sluice loads the file under a private name, which flytekit records in the task's
    # command line and the worker must load from the file.
    (tmp_path / "lone.py").write_text(LONE_MODULE)
    done = sluice(tmp_path / "s.db", "run", "lone.py:lone", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["outputs"] == {"o0": 16}
