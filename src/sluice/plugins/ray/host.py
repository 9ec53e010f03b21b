"""The cluster side of the ray plugin's task mode: a detached named actor (`TaskHost`) that
owns the Ray tasks sluice submits, keyed by each attempt's idempotency key.

A Ray task dies with its owner. Submitted by the engine's own driver, a task would die with
the engine; submitted by this actor (which outlives any engine: `lifetime="detached"`), it
goes on while an engine is killed, and a restarted engine asks the actor for it by key.

- `submit(key, payload, options)` starts `run_payload` as a Ray task unless the key is
  already held (then False): the one submission of an attempt, however often it is asked.
- `poll(key)` says UNKNOWN, RUNNING, DONE (with the answer and the captured output) or
  LOST (Ray itself failed the task: its worker died, it was cancelled).
- `wait(key, seconds)` returns once the task is over or after `seconds`: what an
  engine awaits instead of polling.
- `abort(key)` cancels the task (force: its worker process is killed) and forgets the key.
- `release(key)` (the attempt is over: the engine's finalize) cancels the task if it still
  runs, else keeps its answer for `grace` seconds more and then drops it, so the actor holds
  only unfinished business and the recent past. The grace covers an engine killed between its
  finalize and the write of the attempt's end: restarted, it still finds the answer.

Everything crossing the actor is JSON-like (the payload of `run_job`, its answer): nothing of
the engine's is unpickled on the cluster but this module's functions, by reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from typing import Any

import ray

from sluice.plugins.builtin.worker import run_job

NAMESPACE = "sluice"


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Run the task function of `payload` (see builtin.worker.run_job) in this Ray worker;
    its answer and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        answer = run_job(payload)
    return {"answer": answer, "log": out.getvalue()}


_remote_run: Any = None


def _remote() -> Any:
    global _remote_run
    if _remote_run is None:
        _remote_run = ray.remote(max_retries=0)(run_payload)
    return _remote_run


class TaskHost:
    """The actor (see the module docstring); one per `RayPluginConfig.task_host` name."""

    def __init__(self) -> None:
        self._refs: dict[str, Any] = {}
        self._released: dict[str, tuple[float, dict[str, Any]]] = {}  # oldest first
        self._submitted = 0

    async def submit(self, key: str, payload: dict[str, Any], options: dict[str, Any]) -> bool:
        self._sweep()
        if key in self._refs or key in self._released:
            return False
        self._refs[key] = _remote().options(**options).remote(payload)
        self._submitted += 1
        return True

    async def poll(self, key: str) -> dict[str, Any]:
        released = self._released.get(key)
        if released is not None:
            return released[1]
        ref = self._refs.get(key)
        if ref is None:
            return {"state": "UNKNOWN"}
        ready, _ = ray.wait([ref], timeout=0)
        return await self._outcome(ref) if ready else {"state": "RUNNING"}

    @staticmethod
    async def _outcome(ref: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await ref
        except Exception as exc:  # Ray's own failure: its worker died, it was cancelled...
            return {"state": "LOST", "error": f"{type(exc).__name__}: {exc}"}
        return {"state": "DONE", **result}

    async def wait(self, key: str, seconds: float) -> bool:
        """True once the task is over (or unknown), False after `seconds`."""
        ref = self._refs.get(key)
        if ref is None:
            return True
        done, _ = await asyncio.wait([asyncio.wrap_future(ref.future())], timeout=seconds)
        return bool(done)

    async def abort(self, key: str) -> bool:
        """Cancel the task (its worker is killed) and forget the key: a fresh start of the
        attempt submits again. False if the key was not held."""
        self._released.pop(key, None)
        ref = self._refs.pop(key, None)
        if ref is None:
            return False
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
        return True

    async def release(self, key: str, grace: float) -> None:
        ref = self._refs.get(key)
        if ref is None:
            return
        ready, _ = ray.wait([ref], timeout=0)
        if not ready:
            await self.abort(key)
            return
        outcome = await self._outcome(ref)
        del self._refs[key]
        self._released[key] = (time.monotonic() + grace, outcome)
        self._sweep()

    async def stats(self) -> dict[str, int]:
        """Submissions since the actor started, the tasks it holds and the answers it keeps
        for their grace."""
        return {
            "submitted": self._submitted,
            "held": len(self._refs),
            "released": len(self._released),
        }

    def _sweep(self) -> None:
        now = time.monotonic()
        while self._released:
            key, (until, _) = next(iter(self._released.items()))
            if until > now:
                return
            del self._released[key]


def get_host(name: str) -> Any:
    """The handle of the actor `name`, created on the cluster if it does not exist (needs a
    connected driver: ray.init)."""
    actor = ray.remote(TaskHost).options(
        name=name,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        max_concurrency=10_000,
    )
    return actor.remote()
