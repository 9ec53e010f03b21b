"""The entrypoint of a sluice Ray job: `python -m sluice.plugins.ray.runner`.

It reads the job (module, file, qualname, inputs) from the `SLUICE_RAY_JOB` environment
variable, runs the task function in this driver process (so the function may itself use
`ray.remote`, connected to the job's cluster) and prints the answer as the last line of the
job's log, after protocol.RESULT_MARKER. The log is the one channel the plugin reads on any cluster,
local or remote, through the same Jobs API it submits with: no shared file system needed.
It exits 1 when the function raised, so the job shows as FAILED on the cluster too.
"""

from __future__ import annotations

import json
import os
import sys

from sluice.plugins.ray.protocol import JOB_ENV, RESULT_MARKER


def main() -> int:
    from sluice.plugins.builtin.worker import run_job

    job = json.loads(os.environ[JOB_ENV])
    if job.get("file") and not os.path.exists(job["file"]):
        job["file"] = ""  # a remote cluster: the module comes from the runtime_env, by name
    answer = run_job(job)
    sys.stdout.flush()
    sys.stderr.flush()
    print(RESULT_MARKER + json.dumps(answer), flush=True)
    return 1 if "error" in answer else 0


if __name__ == "__main__":
    sys.exit(main())
