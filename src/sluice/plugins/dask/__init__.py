"""The `dask` plugin: `@sluice.task(type="dask", custom=DaskJobConfig(...))` runs the task's
function on a `distributed` cluster (`pip install 'sluice[dask]'`).

- Where: an existing scheduler (`DaskJobConfig.address` or `plugins.config.dask.address`),
  else a local cluster the plugin starts on 127.0.0.1 (a scheduler and `workers` worker
  processes of `threads` threads, separate processes) and stops when the engine closes.
- Never twice: the task is submitted under a key derived from (execution, node, attempt) and
  published on the scheduler under that key, so it outlives the engine's client; a restarted
  engine gets it back by its key and collects the result. With a local cluster owned by the
  engine, a killed engine takes its cluster with it: the task is submitted again to the new
  engine's cluster. A task published by no one (the engine died between submit and publish)
  is forgotten by the scheduler and submitted again.
- Phases: submitted -> QUEUED, then RUNNING until the result is in; the function raised ->
  retryable USER failure with its traceback; a worker that died, a task cancelled outside
  sluice or a scheduler that cannot be reached -> retryable SYSTEM failure. Abort cancels
  the task (Dask cannot interrupt a function already running in a worker thread: it runs on,
  its result discarded); finalize unpublishes it.
- Logs: the function's stdout and stderr, captured on the worker, reach the task's log when
  the task ends.
"""

from __future__ import annotations

from sluice.plugins.dask.config import DaskJobConfig, DaskPluginConfig

__all__ = ["DaskJobConfig", "DaskPluginConfig"]
