"""The command line of execution concurrency: launch plans, create, pending positions, caps,
and `sluice serve` as a real process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from concurrency.cc_support import FLOWS
from sluice.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}", "SLUICE_ENGINE__WORKERS": "1"}


def sluice(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_create_prints_the_decision_and_ls_shows_positions(env: dict[str, str]) -> None:
    assert sluice(env, "launchplan", "register", f"{FLOWS}:skipping", "--activate").exit_code == 0
    first = sluice(env, "executions", "create", "skipping", "-i", "seconds=30", "--json")
    running = json.loads(first.stdout)
    assert (first.exit_code, running["phase"]) == (0, "QUEUED")  # no engine: it stays active
    skipped = sluice(env, "executions", "create", "skipping")
    assert skipped.exit_code == 3
    assert f"SKIPPED: skipped: 1/1 active ({running['id']})" in skipped.stdout
    assert sluice(env, "launchplan", "register", f"{FLOWS}:waiting", "--activate").exit_code == 0
    made = [sluice(env, "executions", "create", "waiting", "--json") for _ in range(4)]
    phases = [json.loads(m.stdout)["phase"] for m in made]
    assert phases == ["QUEUED", "QUEUED", "PENDING", "PENDING"]
    listed = json.loads(sluice(env, "executions", "ls", "--phase", "pending", "--json").stdout)
    assert [(r["position"], r["reason"][-10:]) for r in listed] == [
        (1, "position 1"),
        (2, "position 2"),
    ]
    assert listed[0]["reason"].startswith("waiting: 2/2 active (")
    plans = json.loads(sluice(env, "launchplan", "ls", "--json").stdout)
    assert {(p["name"], p["state"], p["concurrency"]["behavior"]) for p in plans} == {
        ("skipping", "ACTIVE", "SKIP"),
        ("waiting", "ACTIVE", "WAIT"),
    }


def test_bad_input_is_an_error_naming_the_value_and_changes_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sluice\n"
        f"import sys\nsys.path.insert(0, {str(FLOWS.parent)!r})\n"
        "from cc_flows import napping\n"
        "lp = sluice.LaunchPlan('bad', napping, concurrency=sluice.ConcurrencyPolicy(0))\n"
    )
    cases = [
        (["launchplan", "register", f"{bad}:lp"], "got 0"),
        (["launchplan", "activate", "waiting"], "'waiting'"),
        (["executions", "create", "nope"], "'nope'"),
        (["concurrency", "caps", "set", "default", "0"], "got 0"),
        (["concurrency", "caps", "set", "a/b/c", "2"], "'a/b/c'"),
    ]
    sluice(env, "launchplan", "register", f"{FLOWS}:skipping")
    for args, culprit in cases:
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 2, (args, result.output)
        assert culprit in result.output, (args, result.output)
    typo = CliRunner().invoke(
        cli, ["launchplan", "activate", "skipping", "--version", "v9"], env=env
    )
    assert typo.exit_code == 2 and "'v9'" in typo.output
    plans = json.loads(sluice(env, "launchplan", "ls", "--json").stdout)
    assert [(p["name"], p["state"]) for p in plans] == [("skipping", "INACTIVE")]
    assert json.loads(sluice(env, "concurrency", "caps", "ls", "--json").stdout) == []


def test_caps_set_ls_unset(env: dict[str, str]) -> None:
    assert sluice(env, "concurrency", "caps", "set", "etl", "5").exit_code == 0
    assert sluice(env, "concurrency", "caps", "set", "etl/prod", "2").exit_code == 0
    listed = json.loads(sluice(env, "concurrency", "caps", "ls", "--json").stdout)
    assert [(c["scope"], c["effective"]) for c in listed] == [("etl", 5), ("etl/prod", 2)]
    assert sluice(env, "concurrency", "caps", "unset", "etl").exit_code == 0
    listed = json.loads(sluice(env, "concurrency", "caps", "ls", "--json").stdout)
    assert [c["scope"] for c in listed] == ["etl/prod"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_leads_serves_metrics_and_stops_on_sigterm(env: dict[str, str]) -> None:
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluice", "serve", "--metrics-port", str(port), "--port", "0"],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None and "sluice serve" in serve.stdout.readline()
        deadline = time.monotonic() + 30
        while "sluice_concurrency_leader 1.0" not in (metrics := _metrics(port)):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.2)
        status = json.loads(sluice(env, "concurrency", "status", "--json").stdout)
        assert status["live"] and status["leader"]["holder"].startswith("serve:")
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0, serve.stderr.read() if serve.stderr else ""


def _metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def test_the_no_overlap_example_skips_the_firings_that_would_overlap(tmp_path: Path) -> None:
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "no_overlap.py"), "7"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    fired = [line for line in done.stdout.splitlines() if line.startswith("fired ")]
    assert any("SKIPPED    skipped: 1/1 active (" in line for line in fired), done.stdout
    assert any(" ran " in line or "still running" in line for line in fired), done.stdout


def test_keys_idempotency_keys_and_backfills_on_the_command_line(env: dict[str, str]) -> None:
    assert sluice(env, "launchplan", "register", f"{FLOWS}:keyed", "--activate").exit_code == 0
    plans = sluice({**env, "COLUMNS": "250"}, "launchplan", "ls").stdout
    assert "max 1 WAIT per key {customer} (premium: 2), total 3" in plans
    create = ["executions", "create", "keyed", "-i", "customer=acme", "-i", "seconds=30"]
    first = json.loads(sluice(env, *create, "--idempotency-key", "k1", "--json").stdout)
    again = sluice(env, *create, "--idempotency-key", "k1")
    assert "idempotency key 'k1' created this execution already" in again.stdout
    assert first["id"] in again.stdout and first["concurrency_key"] == "acme"
    conflict = CliRunner().invoke(
        cli, [*create[:-1], "seconds=5", "--idempotency-key", "k1"], env=env
    )
    assert conflict.exit_code == 2 and "idempotency key 'k1'" in conflict.output
    sluice(env, *create)  # acme's one slot is taken: it waits, position 1 for key acme
    pending = sluice(env, "executions", "ls", "--phase", "pending").stdout
    assert " key " in pending.splitlines()[0] and "acme" in pending
    assert sluice(env, "launchplan", "register", f"{FLOWS}:hourly", "--activate").exit_code == 0
    window = ["--from", "2026-03-29T00:00", "--to", "2026-03-29T01:30"]
    made = json.loads(sluice(env, "launchplan", "backfill", "hourly", *window, "--json").stdout)
    assert (made["slots"], made["state"], made["max_active"]) == (2, "RUNNING", 10)
    assert "PAUSED" in sluice(env, "backfill", "pause", made["id"]).stdout
    listed = json.loads(sluice(env, "backfill", "ls", "--json").stdout)
    assert [(b["id"], b["state"], b["progress"]) for b in listed] == [
        (made["id"], "PAUSED", {"PLANNED": 2})
    ]
    assert "CANCELLED" in sluice(env, "backfill", "cancel", made["id"]).stdout
    bad = CliRunner().invoke(
        cli, ["launchplan", "backfill", "hourly", "--from", "yesterday", "--to", "x"], env=env
    )
    assert bad.exit_code == 2 and "'yesterday'" in bad.output
