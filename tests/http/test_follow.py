"""Following a running task's log over real HTTP: its first line arrives while the task is
still running (it waits for the test to let it go), and the stream ends once it has ended."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from sluice.http.server import http_server
from sluice.service import RunRequest, Sluice
from support.http_world import FLOWS


async def _next_event(lines: AsyncIterator[str], events: list[tuple[str, str]]) -> tuple[str, str]:
    """The next server-sent event (name, data) of the stream, appended to `events`."""
    fields: dict[str, str] = {}
    async for line in lines:
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
        elif fields:
            events.append((fields["event"], fields["data"]))
            return events[-1]
    raise AssertionError(f"the stream ended after {events}")


async def test_a_running_tasks_log_is_followed_live(sluice: Sluice, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    request = RunRequest.of(FLOWS.chattering, {"gate": str(gate)})
    events: list[tuple[str, str]] = []
    async with (
        http_server(sluice, "127.0.0.1", 0) as listening,
        sluice.run(request) as running,
        httpx.AsyncClient(base_url=listening.url, timeout=60) as client,
    ):
        path = f"/api/v1/executions/{running.execution_id}/logs/follow"
        async with client.stream("GET", path) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            name, data = await _next_event(lines, events)
            assert (name, json.loads(data)["text"]) == ("line", "chatter started")
            assert not gate.exists()  # the task is still waiting: this line came live
            gate.touch()
            while events[-1][0] != "end":
                await _next_event(lines, events)
        assert (await running.wait()).phase.value == "SUCCEEDED"
    texts = [json.loads(data)["text"] for name, data in events if name == "line"]
    assert texts == ["chatter started", "chatter done"]


async def test_a_follower_does_not_hold_a_stopping_server_up(sluice: Sluice) -> None:
    """A log followed until a QUEUED execution ends (never: no engine runs here) while the
    server stops: the server cancels the stream after its grace instead of waiting."""
    queued = await sluice.runtime.launch(FLOWS.echoing, {})
    path = f"/api/v1/executions/{queued.id}/logs/follow"
    serving = http_server(sluice, "127.0.0.1", 0)
    listening = await serving.__aenter__()
    async with httpx.AsyncClient(timeout=60) as client:
        following = client.stream("GET", listening.url + path)
        stream = await following.__aenter__()
        assert stream.status_code == 200
        await serving.__aexit__(None, None, None)  # the stream still open: this returns
        await following.__aexit__(None, None, None)
