"""Without the `kubernetes` extra, the pod plugin is listed as unavailable and a container
task is refused once at launch, naming the task, the plugin and the install hint.

kubernetes_asyncio is installed in the test venv, so each `sluice` runs in a subprocess whose
import system is told the driver is absent before sluice is imported."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.errors import PluginUnavailableError
from sluice.plugins.builtin.pod import ENTRY
from sluice.plugins.core.plugin import validate_task
from sluice.plugins.core.registry import PluginRegistry
from sluice.plugins.k8s.kube_asyncio import MISSING_DRIVER, driver_missing
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import setup_context
from sluice.spec.models import TaskSpec

HINT = "pip install 'sluice[kubernetes]'"
WITHOUT_DRIVER = (
    "import sys; sys.modules['kubernetes_asyncio'] = None; "
    "from sluice.cli.main import main; sys.exit(main(sys.argv[1:]))"
)
FLOWS = """
import sluice

@sluice.task(type="container", custom={"image": "busybox", "command": ["true"]})
def in_a_pod() -> None: ...

@sluice.task
def double(n: int) -> int:
    return n * 2
"""


def test_the_driver_is_missing_when_it_cannot_be_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert driver_missing() is None
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)
    assert driver_missing() == MISSING_DRIVER
    assert HINT in MISSING_DRIVER


async def test_without_the_driver_the_pod_plugin_refuses_its_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)
    registry = PluginRegistry([ENTRY])
    await registry.load(lambda entry: setup_context(entry.id, {})[0])
    assert registry.unavailable() == {"pod": MISSING_DRIVER}
    task = TaskSpec(name="t", version="1", type="container", custom={"image": "busybox"})
    with pytest.raises(PluginUnavailableError) as caught:
        validate_task(registry.resolve("container"), task)
    assert (
        str(caught.value) == f"task 't' needs plugin 'pod', which is unavailable: {MISSING_DRIVER}"
    )


async def test_an_engine_client_needs_no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)
    setup = setup_context(ENTRY.id, {})[0]
    setup.kube_client = FakeKubeClient()
    manager = ENTRY.load(setup)
    assert manager.unavailable is None  # type: ignore[union-attr]


def _sluice(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}",
        "COLUMNS": "200",  # one table row per plugin, one error line, whatever the terminal
    }
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_DRIVER, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def _executions(tmp_path: Path) -> int:
    if not (tmp_path / "s.db").exists():
        return 0
    with sqlite3.connect(tmp_path / "s.db") as conn:
        return int(conn.execute("SELECT count(*) FROM executions").fetchone()[0])


def test_a_container_task_is_refused_once_at_launch(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    ran = _sluice(tmp_path, "run", "flows.py:in_a_pod")
    assert ran.returncode == 2, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert "in_a_pod'" in lines[0] and "'pod'" in lines[0] and HINT in lines[0]
    assert _executions(tmp_path) == 0


def test_plugins_ls_marks_the_pod_plugin_unavailable(tmp_path: Path) -> None:
    listed = _sluice(tmp_path, "plugins", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    plugins = {p["id"]: p for p in json.loads(listed.stdout)}
    assert plugins["pod"]["loaded"] is False
    assert HINT in plugins["pod"]["why"]
    assert plugins["python"]["loaded"] is True and plugins["python"]["why"] is None
    table = _sluice(tmp_path, "plugins", "ls")
    assert table.returncode == 0, table.stderr
    pod_row = next(line for line in table.stdout.splitlines() if "container" in line)
    assert f"no ({MISSING_DRIVER})" in pod_row


def test_a_python_task_still_runs(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    ran = _sluice(tmp_path, "run", "flows.py:double", "-i", "n=21")
    assert ran.returncode == 0, ran.stderr
    assert "42" in ran.stdout
