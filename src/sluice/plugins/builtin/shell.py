"""The `shell` plugin: a command in a subprocess, with env and timeout; exit code to phase.

Task config (`custom`): {"command": "echo {name}" or ["prog", "{arg}"], "env": {...},
"timeout": seconds, "cwd": path, "permanent_exit_codes": [2]}. A string command is a shell
script: it runs as `/bin/sh -c COMMAND`, so pipes, `;`, redirections and `exit` mean what they
mean in a shell, and each placeholder is replaced by its input shell-quoted, so an input is
always one word and never interpreted. A list command is executed directly (no shell), each
placeholder filled with the input as it is. Exit 0 is success; an exit code listed as
permanent is a permanent failure; any other exit code, or the timeout, is a retryable failure
whose error carries the exit code and the tail of stderr. The command's stdout and stderr
are streamed line by line into the attempt's log as it runs. Outputs named `stdout`,
`stderr` or `exit_code` in the interface receive those values; a task with a single str
output (`-> str`) receives stdout.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.context import SetupContext, TaskExecutionContext, TaskLogWriter
from sluice.plugins.core.phase import ErrorKind, PhaseInfo, Transition
from sluice.plugins.core.plugin import PluginEntry, PluginProperties
from sluice.spec.models import TaskSpec

PLUGIN_ID = "shell"
_TAIL = 4000
_CHUNK = 64 * 1024


class ShellConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use

    command: str | list[str]
    env: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)
    cwd: str | None = None
    permanent_exit_codes: list[int] = Field(default_factory=list)


def parse_config(custom: Mapping[str, Any], task_name: str) -> ShellConfig:
    try:
        return ShellConfig.model_validate(custom)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        raise InvalidPluginConfigError(
            f"shell task {task_name!r}: config field {field!r}: {error['msg']}"
        ) from None


@dataclass
class _Run:
    task: asyncio.Task[tuple[int, str, str, bool]]


class ShellPlugin:
    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    @property
    def id(self) -> str:
        return PLUGIN_ID

    @property
    def properties(self) -> PluginProperties:
        return PluginProperties()

    def validate_task(self, task: TaskSpec) -> None:
        parse_config(task.custom, task.name)

    @staticmethod
    def _key(ctx: TaskExecutionContext) -> str:
        meta = ctx.metadata
        return f"{meta.execution_id}/{meta.node_id}/{meta.attempt}"

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        run = self._runs.get(self._key(ctx))
        if run is None:
            try:
                config = parse_config(ctx.task.custom, ctx.task.name)
                argv = _argv(config.command, ctx.inputs)
            except (InvalidPluginConfigError, KeyError, ValueError) as exc:
                return Transition.to(PhaseInfo.permanent_failure("BadTaskSpecification", str(exc)))
            task = asyncio.create_task(_execute(argv, config, ctx.log_writer))
            task.add_done_callback(lambda _: ctx.refresh())
            self._runs[self._key(ctx)] = _Run(task)
            return Transition.to(PhaseInfo.running(0, f"running {_shown(argv)}"))
        if not run.task.done():
            return Transition.to(PhaseInfo.running(0))
        return Transition.to(self._outcome(ctx, *run.task.result()))

    def _outcome(
        self, ctx: TaskExecutionContext, code: int, out: str, err: str, timed_out: bool
    ) -> PhaseInfo:
        config = parse_config(ctx.task.custom, ctx.task.name)
        if timed_out:
            return PhaseInfo.retryable_failure(
                "Timeout", f"command timed out after {config.timeout}s; stderr: {err[-_TAIL:]}"
            )
        if code < 0:
            return PhaseInfo.system_retryable_failure(
                "Killed", f"command killed by signal {signal.Signals(-code).name}"
            )
        if code != 0:
            kind = (
                PhaseInfo.permanent_failure
                if code in config.permanent_exit_codes
                else PhaseInfo.retryable_failure
            )
            return kind(
                f"ExitCode{code}", f"command exited with {code}: {err[-_TAIL:]}", ErrorKind.USER
            )
        wanted = ctx.task.interface.outputs
        values = {"stdout": out, "stderr": err, "exit_code": code}
        if list(wanted) == ["o0"] and wanted["o0"].kind == "str":
            values["o0"] = out
        ctx.outputs.put({name: values[name] for name in wanted if name in values})
        return PhaseInfo.success()

    async def abort(self, ctx: TaskExecutionContext) -> None:
        run = self._runs.get(self._key(ctx))
        if run is not None and not run.task.done():
            run.task.cancel()

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        await self.abort(ctx)
        self._runs.pop(self._key(ctx), None)


SHELL = "/bin/sh"


def _argv(command: str | list[str], inputs: Mapping[str, Any]) -> list[str]:
    if isinstance(command, str):
        script = command.format_map({k: shlex.quote(str(v)) for k, v in inputs.items()})
        return [SHELL, "-c", script]
    return [part.format_map(dict(inputs)) for part in command]


def _shown(argv: list[str]) -> str:
    """The command as a user wrote it: the script itself for `/bin/sh -c SCRIPT`."""
    if len(argv) == 3 and argv[:2] == [SHELL, "-c"]:
        return argv[2]
    return shlex.join(argv)


async def _execute(
    argv: list[str], config: ShellConfig, log: TaskLogWriter
) -> tuple[int, str, str, bool]:
    env = {**os.environ, **config.env}
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=config.cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out: list[str] = []
    err: list[str] = []
    assert process.stdout is not None and process.stderr is not None
    streams = asyncio.gather(
        _stream(process.stdout, "stdout", out, log),
        _stream(process.stderr, "stderr", err, log),
        process.wait(),
    )
    try:
        await asyncio.wait_for(streams, config.timeout)
    except TimeoutError:
        _kill_group(process)
        await process.wait()
        return -1, "".join(out), "".join(err), True
    except asyncio.CancelledError:
        _kill_group(process)
        with contextlib.suppress(Exception):
            await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, "".join(out), "".join(err), False


async def _stream(
    pipe: asyncio.StreamReader, stream: str, into: list[str], log: TaskLogWriter
) -> None:
    """Keep what the command prints (for outputs and errors) and log it line by line."""
    partial = ""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # chars split in chunks
    while chunk := await pipe.read(_CHUNK):
        text = decoder.decode(chunk)
        into.append(text)
        *lines, partial = (partial + text).split("\n")
        if len(partial) >= _CHUNK:
            lines.append(partial)
            partial = ""
        if lines:
            log.write("\n".join(lines), "stderr" if stream == "stderr" else "stdout")
    if partial:
        log.write(partial, "stderr" if stream == "stderr" else "stdout")


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _load(ctx: SetupContext) -> ShellPlugin:
    return ShellPlugin()


ENTRY = PluginEntry(id=PLUGIN_ID, task_types=("shell",), load=_load)
