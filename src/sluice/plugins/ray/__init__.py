"""The `ray` plugin: `@sluice.task(type="ray", custom=RayJobConfig(...))` runs the task's
function as a Ray job, submitted through the Ray Jobs API (`pip install 'sluice[ray]'`).

- Where: an existing cluster (`RayJobConfig.address` or `plugins.config.ray.address`, the
  dashboard URL), else a local cluster the plugin starts on 127.0.0.1 (`head_cpus`,
  `worker_groups`) and stops when the engine closes (or after the job, with
  `shutdown_after_job`).
- How: the job's entrypoint is `python -m sluice.plugins.ray.runner`, which runs the function
  in the job's driver and prints its JSON answer as the last line of the job's log; the
  plugin reads it there, so a remote cluster needs nothing but the Jobs API.
- Never twice: the submission id is derived from (execution, node, attempt); every `handle`
  looks the job up by that id before submitting, and the cluster refuses a second job of an
  id it knows. A restarted engine finds the job and goes on watching it.
- Phases: PENDING -> INITIALIZING, RUNNING -> RUNNING, SUCCEEDED -> SUCCESS with the outputs;
  the function raised -> retryable USER failure with its traceback; the job failed before the
  function ran, vanished, was stopped outside sluice, or the cluster stopped answering ->
  retryable SYSTEM failure. Abort stops the job; finalize stops it if it still runs.
- Logs: each poll forwards the job's new log lines to the task's log.
- Quotas: a task bounds its use of a shared cluster with `quotas=[Quota("ray:<cluster>")]`
  and a quota set on that namespace, like any other claim.
"""

from __future__ import annotations

from sluice.plugins.ray.config import RayJobConfig, RayPluginConfig, WorkerGroup

# The plugin's ENTRY is in sluice.plugins.ray.entry: a job's runner and the task modules that
# name a RayJobConfig import this package, and they start faster without the plugin machinery.
__all__ = ["RayJobConfig", "RayPluginConfig", "WorkerGroup"]
