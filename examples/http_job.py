"""The builtin `http_job` plugin against a REST job service: POST to create, GET to poll,
DELETE to cancel. This file starts a tiny job service on 127.0.0.1 (standard library only),
then runs a workflow whose tasks are jobs on it, at most 2 at a time (the plugin's quota).

    python examples/http_job.py

The task config maps the service's URLs and its job states to sluice phases; see README
"Plugins" and the docstring of src/sluice/plugins/builtin/http_job.py for every field.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import sluice

JOB_SECONDS = 1.0


class JobService(BaseHTTPRequestHandler):
    """Jobs run for JOB_SECONDS, then succeed with their input doubled."""

    jobs: dict[str, dict[str, Any]] = {}  # shared by the handler instances: a demo server
    ids = itertools.count(1)

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # http.server calls do_<METHOD>
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        job_id = str(next(self.ids))
        self.jobs[job_id] = {"started": time.time(), "value": body.get("value", 0)}
        self._reply(201, {"id": job_id, "state": "queued"})

    def do_GET(self) -> None:
        job = self.jobs.get(self.path.rsplit("/", 1)[-1])
        if job is None:
            self._reply(404, {"error": "no such job"})
        elif job.get("cancelled"):
            self._reply(200, {"state": "cancelled"})
        elif time.time() - job["started"] < JOB_SECONDS:
            self._reply(200, {"state": "running"})
        else:
            self._reply(200, {"state": "succeeded", "result": 2 * job["value"]})

    def do_DELETE(self) -> None:
        job = self.jobs.get(self.path.rsplit("/", 1)[-1])
        if job is not None:
            job["cancelled"] = True
        self._reply(200, {})

    def log_message(self, *args: Any) -> None:  # keep the demo's output readable
        return


def start_service() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), JobService)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


URL = os.environ.get("JOB_SERVICE_URL") or start_service()


@sluice.task(
    type="http_job",
    custom={
        "create": {"url": f"{URL}/jobs", "body": {"value": "{x}"}},
        "status_url": f"{URL}/jobs/{{job_id}}",
        "states": {
            "queued": "QUEUED",
            "running": "RUNNING",
            "succeeded": "SUCCESS",
            "failed": "PERMANENT_FAILURE",
            "cancelled": "PERMANENT_FAILURE",
        },
        "outputs": {"o0": "result"},
    },
)
def remote_double(x: int) -> int: ...


@sluice.task
def add(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def remote_jobs() -> int:
    return add(values=[remote_double(x=i) for i in range(5)])


if __name__ == "__main__":
    os.environ.setdefault(
        "SLUICE_PLUGINS__CONFIG",
        json.dumps(
            {"http_job": {"resource_quotas": {"default": 2}, "caching": {"resync_interval": 5}}}
        ),
    )
    sys.exit(sluice.main(["run", f"{__file__}:remote_jobs"]))
