"""The shell plugin runs a string command through /bin/sh -c, with inputs quoted into it; a
non-zero exit fails the task with the exit code and the tail of stderr."""

from typing import Any

import pytest

import sluice
from sluice.plugins.builtin.shell import ShellPlugin
from sluice.plugins.core.phase import Phase, PhaseInfo
from sluice.plugins.testing import FakeTaskContext, drive


def _spec(command: str | list[str], returns: Any = None) -> Any:
    @sluice.task(type="shell", custom={"command": command})
    def t(name: str = "x") -> returns: ...

    return t.spec


async def _run(command: str | list[str], returns: Any = None, **inputs: Any) -> PhaseInfo:
    ctx = FakeTaskContext(_spec(command, returns), inputs=inputs)
    seen = await drive(ShellPlugin(), ctx)
    _run.outputs = ctx.written_outputs  # type: ignore[attr-defined]
    return seen[-1]


async def test_a_string_command_runs_through_a_shell_and_its_exit_code_fails_the_task() -> None:
    last = await _run("echo hello {name}; echo to-stderr >&2; exit 3", name="sluice")
    assert last.phase is Phase.RETRYABLE_FAILURE
    assert last.error is not None
    assert last.error.code == "ExitCode3"
    assert "exited with 3" in last.error.message
    assert "to-stderr" in last.error.message


async def test_pipes_and_redirections_work_and_stdout_is_the_output() -> None:
    last = await _run("printf 'a\\nb\\n' | wc -l", returns=str)
    assert last.phase is Phase.SUCCESS
    assert _run.outputs == {"o0": "2\n"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("hostile", ["$(touch pwned)", "'; exit 9; '", "a b; rm -rf /nope", "`id`"])
async def test_inputs_are_quoted_never_interpreted(hostile: str, tmp_path: Any) -> None:
    last = await _run(f"cd {tmp_path} && printf %s {{name}}", returns=str, name=hostile)
    assert last.phase is Phase.SUCCESS
    assert _run.outputs == {"o0": hostile}  # type: ignore[attr-defined]
    assert not (tmp_path / "pwned").exists()


async def test_a_list_command_is_executed_without_a_shell() -> None:
    last = await _run(["printf", "%s", "{name}; exit 4"], returns=str, name="n")
    assert last.phase is Phase.SUCCESS
    assert _run.outputs == {"o0": "n; exit 4"}  # type: ignore[attr-defined]


async def test_stdout_and_stderr_stream_into_the_attempt_log_line_by_line() -> None:
    ctx = FakeTaskContext(_spec("echo one; echo two >&2; printf 'é%.0s' 1 2; echo; printf tail"))
    seen = await drive(ShellPlugin(), ctx)
    assert seen[-1].phase is Phase.SUCCESS
    lines = ctx.log_writer.lines  # the two pipes are read concurrently: order per stream
    assert [text for stream, text in lines if stream == "stdout"] == ["one", "éé", "tail"]
    assert [text for stream, text in lines if stream == "stderr"] == ["two"]
