"""An attempt's history comes from what the attempt did, never from its last event: a task
holding a quota ends each attempt with the claim's RELEASED event, which must not become the
attempt's phase, error or (missing) end (issue 26: `phase: "RELEASED"`, `ended_at: null`,
`error: {"namespaces": [...]}` for an attempt that failed with a ValueError)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.config import load_config
from sluice.modules import load_module
from sluice.service import RunRequest, Sluice
from sluice.service.attempts import attempt
from sluice.spec.phases import NodePhase
from sluice.store.records import EventRecord, NodeRecord
from support.http_world import client_for

FLOWS = load_module("service_flows", str(Path(__file__).with_name("service_flows.py")))


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    engine = {"workers": 1, "backoff_base": 0.01, "backoff_max": 0.05}
    quotas = {"quotas": {"scoring-api": 2}}
    opened = await Sluice.open(
        load_config(database_url=sqlite_url, engine=engine, resources=quotas)
    )
    yield opened
    await opened.close()


async def test_a_quota_holders_failed_attempts_read_as_failures(sluice: Sluice) -> None:
    done = await sluice.run_to_end(RunRequest.of(FLOWS.scoring, {}))
    async with client_for(sluice) as api:
        response = await api.get(f"/api/v1/executions/{done.id}/nodes/score/attempts")
    assert response.status_code == 200, response.text
    attempts = response.json()
    assert [a["phase"] for a in attempts] == ["RETRYABLE_FAILURE", "RETRYABLE_FAILURE"]
    for shown in attempts:
        assert shown["ended_at"] is not None and shown["started_at"] is not None
        assert shown["error"]["code"] == "ValueError"
        assert shown["reason"] == "ValueError: cannot score 3"  # one line: the error has the rest
        assert shown["live"] is False
        assert 0 <= shown["duration"] < 60
    events = await sluice.events(done.id)
    assert "RELEASED" in [e.phase for e in events if e.node_id == "score"]


def _event(phase: str, at: float, attempt: int = 0, **fields: object) -> EventRecord:
    return EventRecord("x", phase, at, node_id="n", attempt=attempt, **fields)  # type: ignore[arg-type]


def test_claim_events_never_become_the_phase_end_or_error() -> None:
    node = NodeRecord("x", "n", phase=NodePhase.FAILED, attempt=0, ended_at=9.0)
    seen = [
        _event("GRANTED", 1.0, info={"namespaces": ["q"]}),
        _event("RUNNING", 2.0),
        _event("PERMANENT_FAILURE", 3.0, reason="boom", info={"code": "E", "message": "boom"}),
        _event("RELEASED", 4.0, reason="q", info={"namespaces": ["q"]}),
    ]
    shown = attempt(node, 0, seen, None)
    assert (shown.phase, shown.reason) == ("PERMANENT_FAILURE", "boom")
    assert shown.error == {"code": "E", "message": "boom"}
    assert shown.ended_at is not None and shown.ended_at.timestamp() == 3.0
    assert shown.duration == 1.0


def test_a_live_attempt_is_in_the_nodes_phase_and_has_not_ended() -> None:
    node = NodeRecord("x", "n", phase=NodePhase.RUNNING, task_phase=5, attempt=1)
    node.attempt_started_at = 12.0
    seen = [_event("WAITING_FOR_RESOURCES", 10.0, 1), _event("GRANTED", 12.0, 1)]
    shown = attempt(node, 1, seen, 42)
    assert (shown.phase, shown.live, shown.ended_at, shown.log_bytes) == ("RUNNING", True, None, 42)
    assert shown.first_seen_at is not None and shown.first_seen_at.timestamp() == 10.0
    assert shown.started_at is not None and shown.started_at.timestamp() == 12.0


def test_an_attempt_ended_by_its_nodes_abort_ends_with_the_node() -> None:
    node = NodeRecord("x", "n", phase=NodePhase.ABORTED, task_phase=5, attempt=0, ended_at=7.0)
    shown = attempt(node, 0, [_event("RUNNING", 5.0), _event("RELEASED", 6.0)], None)
    assert (shown.phase, shown.live, shown.error) == ("ABORTED", False, None)
    assert shown.ended_at is not None and shown.ended_at.timestamp() == 7.0
