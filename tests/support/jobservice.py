"""A small REST job service on 127.0.0.1 for web-API plugin tests and benchmarks.

    POST   /jobs        create a job; answers {"id", "state", ...}
    GET    /jobs/{id}   its state: queued -> running -> succeeded | failed (or cancelled)
    DELETE /jobs/{id}   cancel it

Each job's behaviour comes from the create body:
    behavior        "succeed" (default), "fail", "hang" (runs forever) or "vanish" (GET -> 404)
    duration        seconds of running before it ends or vanishes (default 0)
    queued_for      seconds in "queued" before "running" (default 0)
    result          returned as "result" once succeeded
    message         returned as "message" (the failure message)
    throttle_creates  the first N creates with this Idempotency-Key answer 429
    fail_creates      the first N creates with this Idempotency-Key answer 500
    throttle_gets     the first N GETs of the job answer 429
    fail_gets         the first N GETs of the job answer 500
    retry_after     the Retry-After header of those 429s, in seconds (default 1)
    state_on_create the create answer carries the job's state too (default: only its id)

`GET /stats` returns the counters as JSON. Run it as its own process (for benchmarks, so its
CPU does not compete with the client's) with `python -m tests.support.jobservice`; it prints
its URL on the first line of stdout and serves until terminated.

A create carrying an Idempotency-Key already seen returns that job instead of a new one. Time is
read from an injected clock, so tests drive job durations with a FakeClock. Every request is
counted; `max_in_flight` is the most jobs that were running at once (created, not yet ended,
not cancelled).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sluice.clock import Clock, SystemClock


@dataclass
class Job:
    id: str
    spec: dict[str, Any]
    created_at: float
    cancelled_at: float | None = None
    gets: int = 0

    def ends_at(self) -> float | None:
        """When the job stops occupying the service (None: never, unless cancelled)."""
        if self.spec.get("behavior", "succeed") == "hang":
            return self.cancelled_at
        done = self.created_at + _seconds(self.spec, "queued_for") + _seconds(self.spec, "duration")
        return done if self.cancelled_at is None else min(done, self.cancelled_at)

    def active_at(self, now: float) -> bool:
        end = self.ends_at()
        return self.created_at <= now and (end is None or now < end)

    def view(self, now: float) -> dict[str, Any] | None:
        """The job as GET returns it; None once a vanishing job is gone."""
        behavior = self.spec.get("behavior", "succeed")
        body: dict[str, Any] = {"id": self.id, "state": self._state(now, behavior)}
        if body["state"] == "gone":
            return None
        if body["state"] == "succeeded" and "result" in self.spec:
            body["result"] = self.spec["result"]
        if "message" in self.spec:
            body["message"] = self.spec["message"]
        return body

    def _state(self, now: float, behavior: str) -> str:
        if self.cancelled_at is not None:
            return "cancelled"
        elapsed = now - self.created_at
        if elapsed < _seconds(self.spec, "queued_for"):
            return "queued"
        end = self.ends_at()
        if end is None or now < end:
            return "running"
        return {"fail": "failed", "vanish": "gone"}.get(behavior, "succeeded")


def _seconds(spec: dict[str, Any], key: str) -> float:
    return float(spec.get(key, 0.0))


@dataclass
class JobService:
    """`async with JobService() as service:` serves on `service.url` until the block ends."""

    clock: Clock = field(default_factory=SystemClock)
    jobs: dict[str, Job] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    """Requests by kind: create, create_429, create_500, get, get_429, get_500, get_404,
    delete."""
    creates_by_key: Counter[str] = field(default_factory=Counter)
    get_times: list[float] = field(default_factory=list)
    authorizations: Counter[str] = field(default_factory=Counter)
    """Authorization header values seen, on any request."""
    max_in_flight: int = 0
    url: str = ""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _by_key: dict[str, str] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> JobService:
        app = web.Application(middlewares=[self._record_auth])
        app.router.add_post("/jobs", self._create)
        app.router.add_get("/jobs/{id}", self._get)
        app.router.add_delete("/jobs/{id}", self._delete)
        app.router.add_get("/stats", self._stats)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def created(self) -> int:
        """Jobs created (a repeated Idempotency-Key does not create another)."""
        return len(self.jobs)

    def in_flight(self) -> int:
        now = self.clock.now()
        return sum(job.active_at(now) for job in self.jobs.values())

    def job_calls(self, job_id: str) -> int:
        return self.jobs[job_id].gets

    @web.middleware
    async def _record_auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if "Authorization" in request.headers:
            self.authorizations[request.headers["Authorization"]] += 1
        response: web.StreamResponse = await handler(request)
        return response

    async def _create(self, request: web.Request) -> web.Response:
        spec = await request.json()
        key = request.headers.get("Idempotency-Key", "")
        self.requests["create"] += 1
        self.creates_by_key[key] += 1
        attempt = self.creates_by_key[key]
        if attempt <= int(spec.get("throttle_creates", 0)):
            return self._throttled("create_429", spec)
        if attempt <= int(spec.get("throttle_creates", 0)) + int(spec.get("fail_creates", 0)):
            self.requests["create_500"] += 1
            return web.json_response({"error": "boom"}, status=500)
        if key and key in self._by_key:
            return web.json_response(self._view(self.jobs[self._by_key[key]]), status=200)
        job = Job(f"job-{next(self._ids)}", spec, self.clock.now())
        self.jobs[job.id] = job
        if key:
            self._by_key[key] = job.id
        self.max_in_flight = max(self.max_in_flight, self.in_flight())
        body = self._view(job) if spec.get("state_on_create") else {"id": job.id}
        return web.json_response(body, status=201)

    async def _get(self, request: web.Request) -> web.Response:
        self.requests["get"] += 1
        self.get_times.append(self.clock.now())
        job = self.jobs.get(request.match_info["id"])
        if job is None:
            self.requests["get_404"] += 1
            return web.json_response({"error": "no such job"}, status=404)
        job.gets += 1
        if job.gets <= int(job.spec.get("throttle_gets", 0)):
            return self._throttled("get_429", job.spec)
        if job.gets <= int(job.spec.get("throttle_gets", 0)) + int(job.spec.get("fail_gets", 0)):
            self.requests["get_500"] += 1
            return web.json_response({"error": "boom"}, status=500)
        view = job.view(self.clock.now())
        if view is None:
            self.requests["get_404"] += 1
            return web.json_response({"error": "no such job"}, status=404)
        return web.json_response(view)

    async def _delete(self, request: web.Request) -> web.Response:
        self.requests["delete"] += 1
        job = self.jobs.get(request.match_info["id"])
        if job is None:
            return web.json_response({"error": "no such job"}, status=404)
        if job.cancelled_at is None:
            job.cancelled_at = self.clock.now()
        return web.json_response(self._view(job))

    def stats(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "requests": dict(self.requests),
            "max_in_flight": self.max_in_flight,
            "get_times": self.get_times,
        }

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    def _view(self, job: Job) -> dict[str, Any]:
        return job.view(self.clock.now()) or {"id": job.id, "state": "gone"}

    def _throttled(self, kind: str, spec: dict[str, Any]) -> web.Response:
        self.requests[kind] += 1
        headers = {"Retry-After": str(spec.get("retry_after", 1))}
        return web.json_response({"error": "slow down"}, status=429, headers=headers)


class ScaledClock:
    """Wall time running `scale` times faster than real time from (`start`, `origin`): two
    processes given the same three numbers read the same time (monotonic is system-wide)."""

    def __init__(
        self, scale: float, start: float | None = None, origin: float | None = None
    ) -> None:
        self.scale = scale
        self.start = time.time() if start is None else start
        self.origin = time.monotonic() if origin is None else origin

    def now(self) -> float:
        return self.start + (time.monotonic() - self.origin) * self.scale

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.scale)


async def _serve(args: argparse.Namespace) -> None:
    clock = ScaledClock(args.time_scale, args.start, args.origin)
    async with JobService(clock) as service:
        print(json.dumps({"url": service.url}), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve the test job service.")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--start", type=float, default=None)
    parser.add_argument("--origin", type=float, default=None)
    asyncio.run(_serve(parser.parse_args()))
