"""`sluice tokens create|ls|revoke`, and `sluice serve` answering over real HTTP: on
loopback without a token, elsewhere only with one."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from sluice.cli.main import cli
from support.http_world import client_for, open_sluice

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}", "SLUICE_ENGINE__WORKERS": "1"}


def sluice(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_tokens_are_created_listed_and_revoked(env: dict[str, str]) -> None:
    created = sluice(env, "tokens", "create", "--project", "a", "--project", "b", "--read-only")
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip()
    assert re.fullmatch(r"sluice_[0-9a-f]{16}_[\w-]{43}", secret)
    assert "read-only on a, b" in created.stderr
    (listed,) = json.loads(sluice(env, "tokens", "ls", "--json").stdout)
    assert listed["projects"] == ["a", "b"]
    assert listed["read_only"] is True
    assert secret not in sluice(env, "tokens", "ls", "--json").stdout
    assert sluice(env, "tokens", "revoke", listed["id"]).exit_code == 0
    again = sluice(env, "tokens", "revoke", listed["id"])
    assert again.exit_code == 2
    assert "already revoked" in again.stderr


def test_a_token_needs_a_valid_project(env: dict[str, str]) -> None:
    result = sluice(env, "tokens", "create", "--project", "no way")
    assert result.exit_code == 2
    assert "'no way'" in result.stderr


@pytest.fixture
def served(env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[str]:
    """`sluice serve` on a free port of the host given by the test's parameter; its URL."""
    host = getattr(request, "param", "127.0.0.1")
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluice", "serve", "--no-engine", "--host", host, "--port", "0"],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        assert "sluice serve" in serve.stdout.readline()
        line = serve.stdout.readline()
        match = re.search(r"HTTP API on (http://\S+)/api/v1", line)
        assert match, line
        yield match.group(1).replace("0.0.0.0", "127.0.0.1")
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0


def test_serve_answers_on_loopback_without_a_token(served: str) -> None:
    assert httpx.get(f"{served}/api/v1/ready").json()["ok"] is True
    listed = httpx.get(f"{served}/api/v1/executions").json()
    assert listed == {"items": [], "next_cursor": None, "prev_cursor": None, "total": 0}


@pytest.mark.parametrize("served", ["0.0.0.0"], indirect=True)
def test_serve_elsewhere_needs_a_token(served: str, env: dict[str, str]) -> None:
    assert httpx.get(f"{served}/api/v1/executions").status_code == 401
    secret = sluice(env, "tokens", "create", "--project", "default").stdout.strip()
    headers = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(f"{served}/api/v1/executions", headers=headers).status_code == 200


def test_a_taken_port_is_one_clear_error(env: dict[str, str], served: str) -> None:
    port = served.rsplit(":", 1)[1]
    result = sluice(env, "serve", "--port", port)
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


def _api_detail(url: str, method: str, path: str) -> str:
    async def ask() -> str:
        sluice = await open_sluice(url, "default")
        try:
            async with client_for(sluice) as client:
                return str((await client.request(method, path)).json()["detail"])
        finally:
            await sluice.close()

    return asyncio.run(ask())


@pytest.mark.parametrize(
    ("cli_args", "method", "path"),
    [
        (["executions", "show", "nope"], "GET", "/api/v1/executions/nope"),
        (["executions", "abort", "nope"], "POST", "/api/v1/executions/nope/abort"),
        (["launchplan", "activate", "nothing"], "POST", "/api/v1/launch-plans/nothing/activate"),
        (["executions", "ls", "--phase", "sleepy"], "GET", "/api/v1/executions?phase=sleepy"),
    ],
)
def test_the_api_says_what_the_cli_says(
    env: dict[str, str], cli_args: list[str], method: str, path: str
) -> None:
    detail = _api_detail(env["SLUICE_DATABASE_URL"], method, path)  # creates the store too
    result = sluice(env, *cli_args)
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()) == f"error: {detail}"


def _start_serve(env: dict[str, str], lines: int = 2) -> tuple[subprocess.Popen[str], str, str]:
    """`sluice serve` with the default port; the process, its URL and what it said."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluice", "serve", "--no-engine", "--no-schedules"],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert serve.stdout is not None
    said = "".join(serve.stdout.readline() for _ in range(lines))
    match = re.search(r"HTTP API on (http://\S+)/api/v1", said)
    if match is None:
        serve.kill()
        pytest.fail(f"serve did not start: {said} {serve.communicate()[1]}")
    return serve, match.group(1), said


def test_two_serves_on_one_host_both_start(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 26: a second `sluice serve` collided on port 8080 unless told --port. The
    default port falls forward to the next free one and says so; an explicit --port that is
    taken stays an error naming it (test_a_taken_port_is_one_clear_error)."""
    other = {**env, "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    first, first_url, _ = _start_serve(env)
    try:
        second, second_url, said = _start_serve(other, lines=3)
        try:
            assert first_url != second_url
            assert "is in use" in said
            for url in (first_url, second_url):
                assert httpx.get(f"{url}/api/v1/health").json() == {"ok": True}
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=30)
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
