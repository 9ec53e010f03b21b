"""The UI's writes: abort, activate and deactivate post forms carrying the page's CSRF token,
then redirect; a post without the token, or with another one, is refused."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import httpx

from sluice.runtime import Runtime
from sluice.service import Sluice
from ui.ui_support import eventually, finished

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


async def token_of(client: httpx.AsyncClient, url: str) -> str:
    """The token a page renders in its forms (its cookie is now in the client)."""
    page = await client.get(url)
    found = TOKEN.search(page.text)
    assert found, f"no CSRF field in {url}"
    return found.group(1)


async def test_the_pending_queue_abort_and_activation_buttons(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    (tmp_path / "report.gate").touch()
    sluice = Sluice(runtime)
    await sluice.register_launch_plan(flows.nightly, activate=True)
    inputs = {"directory": str(tmp_path)}
    running = await sluice.create("nightly", inputs)
    queued = await sluice.create("nightly", inputs)
    assert queued.phase == "PENDING" and queued.position == 1

    page = await client.get("/launch-plans")
    assert (
        "nightly" in page.text
        and "ACTIVE" in page.text
        and "cron 0 3 * * * (UTC)" in page.text
        and "WAIT, at most 1 active" in page.text
    )
    assert "Next firings" in page.text
    row = page.text.split(f'data-execution="{queued.id}"')[1].split("</tr>")[0]
    assert "<td>1</td>" in row and queued.reason in row

    token = await token_of(client, "/launch-plans")
    aborted = await client.post(
        f"/executions/{queued.id}/abort", data={"csrf_token": token, "next": "/launch-plans"}
    )
    assert aborted.status_code == 303 and aborted.headers["location"] == "/launch-plans"
    await eventually(lambda: finished(sluice, queued.id), "the pending execution is aborted")
    assert (await sluice.execution(queued.id)).phase == "ABORTED"

    off = await client.post("/launch-plans/nightly/deactivate", data={"csrf_token": token})
    assert off.status_code == 303
    assert "no active version" in (await client.get(off.headers["location"])).text
    version = (await sluice.launch_plans("nightly"))[0].version
    on = await client.post(
        "/launch-plans/nightly/activate", data={"csrf_token": token, "version": version}
    )
    assert on.status_code == 303
    assert (await sluice.launch_plans("nightly", active_only=True))[0].version == version

    (tmp_path / "report.gate").unlink()
    await eventually(lambda: finished(sluice, running.id), "the running execution ends")


async def test_a_post_without_the_pages_token_is_refused(
    runtime: Runtime, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    sluice = Sluice(runtime)
    await sluice.register_launch_plan(flows.nightly, activate=True)
    missing = await client.post("/launch-plans/nightly/deactivate", data={})
    assert missing.status_code == 403 and "CSRF token" in missing.text
    await token_of(client, "/launch-plans")  # the client now has a cookie
    forged = await client.post("/launch-plans/nightly/deactivate", data={"csrf_token": "x" * 43})
    assert forged.status_code == 403
    token = await token_of(client, "/launch-plans")
    cross_site = await client.post(
        "/launch-plans/nightly/deactivate",
        data={"csrf_token": token},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert cross_site.status_code == 403
    assert await sluice.launch_plans("nightly", active_only=True)  # still ACTIVE


async def test_an_abort_redirect_stays_on_this_server(
    runtime: Runtime, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    record = await runtime.launch(flows.report, {"directory": str(tmp_path)})
    token = await token_of(client, f"/executions/{record.id}")
    answer = await client.post(
        f"/executions/{record.id}/abort",
        data={"csrf_token": token, "next": "//evil.example/"},
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/"


async def test_a_server_that_needs_tokens_sends_the_browser_to_sign_in(runtime: Runtime) -> None:
    from sluice.http.app import create_app
    from sluice.http.auth import token_auth

    sluice = Sluice(runtime)
    issued = await sluice.tokens.create(["default"])
    app = create_app(sluice, authorize=token_auth(sluice, required=True))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ui.example") as client:
        first = await client.get("/quotas")
        assert first.status_code == 303
        assert first.headers["location"] == "/sign-in?next=%2Fquotas"
        token = await token_of(client, first.headers["location"])
        wrong = await client.post(
            "/sign-in", data={"csrf_token": token, "token": "nope", "next": "/quotas"}
        )
        assert wrong.status_code == 401 and "not valid" in wrong.text
        right = await client.post(
            "/sign-in", data={"csrf_token": token, "token": issued.secret, "next": "/quotas"}
        )
        assert right.status_code == 303 and right.headers["location"] == "/quotas"
        page = await client.get("/quotas")
        assert page.status_code == 200 and "Sign out" in page.text
        out = await client.post("/sign-out", data={"csrf_token": token})
        assert out.status_code == 303
        assert (await client.get("/quotas")).status_code == 303
