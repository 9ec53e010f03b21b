"""The "probe" plugin: runs a task body (probe_body.py) as a child process of the engine.

The body records start/end lines with its execution, node, attempt, pid and engine pid to the
history file named by its `history` input, and dies with the engine (PR_SET_PDEATHSIG), as a
python worker does. An attempt resumed by a restarted engine has no child here, so its body is
started again, as the python plugin submits a lost job again. Inputs it reads: `history`,
`seconds` (how long the body runs), `fails` (the first attempts that fail, retryably) and
`hold` (a path: the body also runs while it exists; "" for none).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from sluice.cache import cache_key
from sluice.locks.names import lock_names
from sluice.plugins.core import (
    PhaseInfo,
    PluginEntry,
    PluginProperties,
    SetupContext,
    TaskExecutionContext,
    Transition,
)

BODY = Path(__file__).resolve().parent / "probe_body.py"


@dataclass
class _Run:
    process: asyncio.subprocess.Process
    task: asyncio.Task[tuple[int, bytes]]


def tags(ctx: TaskExecutionContext) -> list[str]:
    """What the body holds: its quotas, its locks and its cache key."""
    task, inputs = ctx.task, dict(ctx.inputs)
    found = [f"q:{q.namespace}" for q in task.claims.quotas]
    found += [f"l:{name}" for name in sorted(lock_names(task, inputs))]
    if task.metadata.cache.enabled:
        meta = ctx.metadata
        found.append(f"c:{cache_key(meta.project, meta.domain, task, inputs)}")
    return found


class ProbePlugin:
    id = "probe"
    properties = PluginProperties()

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    @staticmethod
    def _key(ctx: TaskExecutionContext) -> str:
        meta = ctx.metadata
        return f"{meta.execution_id}/{meta.node_id}/{meta.attempt}"

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        run = self._runs.get(self._key(ctx))
        if run is None:
            self._runs[self._key(ctx)] = await self._start(ctx)
            return Transition.to(PhaseInfo.running(0, "probe body running"))
        if not run.task.done():
            return Transition.to(PhaseInfo.running(0, "probe body running"))
        code, out = run.task.result()
        if code == 0:
            if "o0" in ctx.task.interface.outputs:
                ctx.outputs.put({"o0": int(out.decode().strip() or 0)})
            return Transition.to(PhaseInfo.success())
        if code == 3:
            return Transition.to(
                PhaseInfo.retryable_failure("ProbeFailed", "the body failed on purpose")
            )
        return Transition.to(
            PhaseInfo.system_retryable_failure("ProbeDied", f"the body exited with {code}")
        )

    async def _start(self, ctx: TaskExecutionContext) -> _Run:
        inputs, meta = ctx.inputs, ctx.metadata
        fail = meta.attempt < int(inputs.get("fails", 0))
        env = {**os.environ, "PROBE_ENGINE_PID": str(os.getpid())}
        if inputs.get("hold"):
            env["HOLD"] = str(inputs["hold"])
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(BODY),
            str(inputs["history"]),
            meta.execution_id,
            meta.node_id,
            str(meta.attempt),
            str(inputs.get("seconds", 0.1)),
            "1" if fail else "0",
            ",".join(tags(ctx)),
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )

        async def wait() -> tuple[int, bytes]:
            out, _ = await process.communicate()
            return process.returncode or 0, out

        task = asyncio.create_task(wait())
        task.add_done_callback(lambda _: ctx.refresh())
        return _Run(process, task)

    async def abort(self, ctx: TaskExecutionContext) -> None:
        """Stop the body and wait until it is gone, so its end is recorded before the engine
        gives its tokens back."""
        run = self._runs.get(self._key(ctx))
        if run is None or run.task.done():
            return
        with contextlib.suppress(ProcessLookupError):
            run.process.terminate()
        try:
            await asyncio.wait_for(asyncio.shield(run.task), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                run.process.kill()

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        await self.abort(ctx)
        self._runs.pop(self._key(ctx), None)


def _load(setup: SetupContext) -> ProbePlugin:
    return ProbePlugin()


ENTRY = PluginEntry(id="probe", task_types=("probe",), load=_load)
