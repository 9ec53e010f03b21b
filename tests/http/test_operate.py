"""Operator verbs over the API (issue 26, defect 10): who am I, a bulk abort whose audit
names who asked, relaunch with changed inputs linked to the original, retry refused for an
execution that did not fail."""

from __future__ import annotations

from sluice.http.auth import token_auth
from sluice.service import Sluice
from support.http_world import Project, client_for


async def test_a_bulk_abort_names_who_asked(two_projects: tuple[Sluice, Project, Project]) -> None:
    sluice, mine, _ = two_projects
    issued = await sluice.tokens.create([mine.name], name="oncall")
    queued = (await sluice.create("waiting_plan", {})).id  # a second PENDING one
    async with client_for(sluice, token_auth(sluice, required=True)) as api:
        api.headers["Authorization"] = f"Bearer {issued.secret}"
        caller = (await api.get("/api/v1/whoami")).json()
        assert caller == {
            "who": f"token oncall ({issued.token.id})",
            "projects": [mine.name],
            "read_only": False,
            "may_write": True,
        }
        body = {"ids": [mine.pending, queued], "reason": "cleaning up"}
        response = await api.post("/api/v1/executions/bulk-abort", json=body)
        assert response.status_code == 200, response.text
        assert {e["phase"] for e in response.json()} <= {"ABORTING", "ABORTED"}
        events = (await api.get(f"/api/v1/executions/{queued}/events")).json()
    reasons = [e["reason"] for e in events if e["phase"] in ("ABORTING", "ABORTED")]
    assert f"cleaning up by token oncall ({issued.token.id})" in reasons


async def test_a_read_only_token_cannot_bulk_abort(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, mine, _ = two_projects
    issued = await sluice.tokens.create([mine.name], read_only=True)
    async with client_for(sluice, token_auth(sluice, required=True)) as api:
        api.headers["Authorization"] = f"Bearer {issued.secret}"
        assert (await api.get("/api/v1/whoami")).json()["may_write"] is False
        body = {"ids": [mine.pending]}
        assert (await api.post("/api/v1/executions/bulk-abort", json=body)).status_code == 403


async def test_relaunch_and_retry(two_projects: tuple[Sluice, Project, Project]) -> None:
    sluice, mine, _ = two_projects
    async with client_for(sluice, token_auth(sluice, required=False)) as api:
        assert (await api.get("/api/v1/whoami")).json()["who"] == "a local user"
        path = f"/api/v1/executions/{mine.execution}/relaunch"
        response = await api.post(path, json={"inputs": {"text": "again"}})
        assert response.status_code == 201, response.text
        again = (await api.get(f"/api/v1/executions/{response.json()['id']}")).json()
        assert again["relaunch_of"] == mine.execution and again["inputs"] == {"text": "again"}
        bad = await api.post(path, json={"inputs": {"nope": 1}})
        assert bad.status_code == 422 and "nope" in bad.json()["detail"]
        refused = await api.post(f"/api/v1/executions/{mine.execution}/retry")
        assert refused.status_code == 422 and "only a FAILED" in refused.json()["detail"]


async def test_the_launch_form_and_the_catalogue(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, _, _ = two_projects
    async with client_for(sluice) as api:
        form = (await api.get("/api/v1/launch-plans/echo_plan/form")).json()
        assert form["fields"][0] | {"error": ""} == {
            "name": "text",
            "type": "str",
            "widget": "text",
            "choices": [],
            "value": "hi",
            "required": False,
            "optional": False,
            "fixed": False,
            "error": "",
        }
        listed = (await api.get("/api/v1/catalogue")).json()
        names = [w["name"] for w in listed["workflows"]]
        assert "http_flows.echoing" in names
        workflow = (await api.get("/api/v1/workflows/http_flows.echoing")).json()
        assert [n["node"] for n in workflow["nodes"]] == ["echo"]
        assert workflow["launch_plans"] == ["echo_plan", "hourly_plan", "waiting_plan"]
        assert workflow["tasks"][0]["name"] == "http_flows.echo"
        missing = await api.get("/api/v1/workflows/nothing")
        assert missing.status_code == 404
