"""kill -9 of the engine while its Dask task runs on an external scheduler: the task, published
under its key, goes on; a restarted engine takes it back (one run in all) and collects its
result."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.dask.conftest import DASK_FLOWS

from support.crash import kill_9_when, only_outputs, resume_until_succeeded, sluice


def test_kill_9_while_a_dask_task_runs_runs_it_once_and_collects_the_result(
    dask_address: str, tmp_path: Path
) -> None:
    db, config, signal_file = tmp_path / "s.db", tmp_path / "sluice.toml", tmp_path / "go"
    runs = tmp_path / "runs"
    config.write_text(f'[plugins.config.dask]\naddress = "{dask_address}"\n')
    inputs = ["--input", f"path={signal_file}", "--input", f"runs={runs}"]
    run = sluice(["run", f"{DASK_FLOWS}:waiting", *inputs], db, 1, config=config)
    kill_9_when(run, runs.exists, timeout=120)
    signal_file.write_text("done while the engine was dead")
    resume_until_succeeded(db, 1, config=config, stderr=tmp_path / "e.err")
    assert only_outputs(db) == {"o0": "done while the engine was dead"}
    assert runs.read_text() == "run\n"  # one run, never two
