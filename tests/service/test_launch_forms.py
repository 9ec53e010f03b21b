"""Launching again (issue 26): a form from a launch plan's inputs with its defaults and fixed
inputs, errors said field by field; a relaunch with an execution's inputs, linked to it; a
retry of a failed execution that reuses the nodes that succeeded (they do not run again) and
runs the failed ones, recorded as a new execution linked to the old."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.config import load_config
from sluice.errors import InvalidArgumentError
from sluice.modules import load_module
from sluice.service import RunRequest, Sluice
from sluice.service.launch_forms import FormErrors
from support.engine import fast_settings

FLOWS = load_module("service_flows", str(Path(__file__).with_name("service_flows.py")))


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    engine = fast_settings(sqlite_url).engine.model_dump()
    opened = await Sluice.open(load_config(database_url=sqlite_url, engine=engine))
    await opened.register_launch_plan(FLOWS.two_steps_plan, activate=True)
    yield opened
    await opened.close()


async def _drive(sluice: Sluice, execution_id: str) -> str:
    engine = await sluice.runtime.engine(only=[execution_id])
    await engine.start()
    try:
        await engine.wait(execution_id)
    finally:
        await engine.stop()
    return (await sluice.execution(execution_id)).phase


async def test_a_retry_reuses_what_succeeded_and_runs_what_failed(
    sluice: Sluice, tmp_path: Path
) -> None:
    (tmp_path / "broken").touch()
    inputs = {"directory": str(tmp_path)}
    failed = await sluice.run_to_end(RunRequest.of(FLOWS.two_steps, inputs))
    assert failed.phase.value == "FAILED"
    assert (tmp_path / "prepare.runs").read_text() == "1"
    (tmp_path / "broken").unlink()

    retried = await sluice.retry(failed.id[:12])
    assert await _drive(sluice, retried.id) == "SUCCEEDED"
    view = await sluice.execution(retried.id, events=True)
    assert view.retry_of == failed.id and view.outputs == {"o0": 6}
    assert (tmp_path / "prepare.runs").read_text() == "1", "prepare ran again"
    prepare = next(n for n in view.nodes if n.node == "prepare")
    assert prepare.phase == "SUCCEEDED" and prepare.outputs == {"o0": [0, 1, 2, 3]}
    assert prepare.reason == f"reused from {failed.id}/prepare"
    reused = [e for e in view.events if e.phase == "REUSED"]
    assert [e.node_id for e in reused] == ["prepare"]
    with pytest.raises(InvalidArgumentError, match="SUCCEEDED"):
        await sluice.retry(retried.id)


async def test_the_form_has_the_inputs_and_says_what_is_wrong_by_field(
    sluice: Sluice, tmp_path: Path
) -> None:
    form = await sluice.launch_form("two_steps_plan")
    fields = {f.name: f for f in form.fields}
    assert (fields["directory"].required, fields["directory"].widget) == (True, "text")
    assert (fields["n"].value, fields["n"].required, fields["n"].type) == ("4", False, "int")
    with pytest.raises(FormErrors) as refused:
        await sluice.launch_from_form(
            {"directory": str(tmp_path), "n": "four", "m": "1"}, launch_plan="two_steps_plan"
        )
    assert set(refused.value.fields) == {"n", "m"}
    assert "four" in refused.value.fields["n"]
    assert (await sluice.executions()).total == 0  # nothing written
    launched = await sluice.launch_from_form(
        {"directory": str(tmp_path), "n": "2"}, launch_plan="two_steps_plan"
    )
    assert (await sluice.execution(launched.id)).inputs == {"directory": str(tmp_path), "n": 2}

    again = await sluice.relaunch_form(launched.id)
    assert {f.name: f.value for f in again.fields} == {"directory": str(tmp_path), "n": "2"}
    assert again.relaunch_of == launched.id
    relaunched = await sluice.launch_from_form(
        {"directory": str(tmp_path), "n": "3"}, relaunch_of=launched.id
    )
    shown = await sluice.execution(relaunched.id)
    assert shown.relaunch_of == launched.id and shown.inputs["n"] == 3
