"""Flytekit launch plans on sluice: registered from the module or imported from `pyflyte
package` output, with their schedule and their concurrency policy (max 1, SKIP) enforced."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from sluice.flyte.package import read_package
from sluice.flyte.workflows import workflow_spec
from sluice.runtime import resolve_target
from sluice.spec.compound import map_options
from sluice.spec.models import WorkflowSpec
from support.flyte import CHAIN, FLOWS_ROOT, sluice

EXIT_SKIPPED = 3


def test_a_second_execution_at_max_concurrency_is_skipped(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    done = sluice(db, "launchplan", "register", f"{CHAIN}:every_minute", "--activate", "--json")
    assert done.returncode == 0, done.stderr
    registered = json.loads(done.stdout)
    assert registered["state"] == "ACTIVE"
    listed = json.loads(sluice(db, "launchplan", "ls", "--json").stdout)
    assert listed[0]["schedule"]["fixed_rate"] == 60.0
    assert listed[0]["concurrency"] == {"behavior": "SKIP", "max": 1, "max_pending": None}
    assert listed[0]["next_firings"], "an ACTIVE scheduled plan shows its next firings"
    first = sluice(db, "executions", "create", "every_minute", "--json")
    assert first.returncode == 0, first.stderr
    running = json.loads(first.stdout)
    assert running["phase"] == "QUEUED"  # no engine here: it stays active
    second = sluice(db, "executions", "create", "every_minute", "--json")
    assert second.returncode == EXIT_SKIPPED, second.stderr
    skipped = json.loads(second.stdout)
    assert skipped["phase"] == "SKIPPED"
    assert running["id"] in skipped["reason"]


def test_a_pyflyte_package_is_imported_and_its_launch_plans_run(tmp_path: Path) -> None:
    package = tmp_path / "flyteflows.tgz"
    pyflyte = Path(sys.executable).with_name("pyflyte")
    subprocess.run(
        [
            str(pyflyte),
            "--pkgs",
            "flyteflows",
            "package",
            "--image",
            "sluice:test",
            "-o",
            str(package),
        ],
        cwd=FLOWS_ROOT,
        check=True,
        capture_output=True,
        timeout=240,
    )
    db = tmp_path / "s.db"
    root = f"--source-root={FLOWS_ROOT}"
    done = sluice(db, "flyte", "import", str(package), root, "--activate", "--json")
    assert done.returncode == 0, done.stderr
    names = {plan["name"] for plan in json.loads(done.stdout)}
    assert {"flyteflows.chain.plain", "every_minute", "fixed_a"} <= names
    ran = sluice(db, "executions", "create", "fixed_a", "--wait", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["outputs"] == {"o0": 7}  # fixed a=5, inc twice


def test_a_package_path_that_does_not_exist_is_named(tmp_path: Path) -> None:
    done = sluice(tmp_path / "s.db", "flyte", "import", str(tmp_path / "missing.tgz"))
    assert done.returncode != 0
    assert "missing.tgz" in done.stderr


def test_a_launch_plan_with_an_unsupported_workflow_is_not_imported(tmp_path: Path) -> None:
    serialized = tmp_path / "serialized"
    serialized.mkdir()
    pyflyte = Path(sys.executable).with_name("pyflyte")
    command = [str(pyflyte), "--pkgs", "unsupported", "serialize", "--image", "sluice:test"]
    subprocess.run(
        [*command, "workflows", "-f", str(serialized)],
        cwd=FLOWS_ROOT,
        check=True,
        capture_output=True,
        timeout=240,
    )
    done = sluice(tmp_path / "s.db", "flyte", "import", str(serialized))
    assert done.returncode != 0
    # the first refused launch plan in name order: the echo of two inputs
    assert "'unsupported.refused.echo_two': node 'n0'" in done.stderr
    assert "an echo task of 2 inputs is not supported" in done.stderr


def test_pyflyte_serialize_output_maps_as_in_process_and_runs(tmp_path: Path) -> None:
    serialized = tmp_path / "serialized"
    serialized.mkdir()
    pyflyte = Path(sys.executable).with_name("pyflyte")
    command = [str(pyflyte), "--pkgs", "flyteflows", "serialize", "--image", "sluice:test"]
    subprocess.run(
        [*command, "workflows", "-f", str(serialized)],
        cwd=FLOWS_ROOT,
        check=True,
        capture_output=True,
        timeout=240,
    )
    entities = read_package(str(serialized), str(FLOWS_ROOT))
    if str(FLOWS_ROOT) not in sys.path:
        sys.path.insert(0, str(FLOWS_ROOT))
    maps = importlib.import_module("flyteflows.maps")
    for name in ("mapped", "tolerant", "outer", "dynamic_fan"):
        from_file = workflow_spec(entities, f"flyteflows.maps.{name}")
        in_process, _ = resolve_target(getattr(maps, name))
        assert _shape(from_file) == _shape(in_process), name
    db = tmp_path / "s.db"
    root = f"--source-root={FLOWS_ROOT}"
    done = sluice(db, "flyte", "import", str(serialized), root, "--activate", "--json")
    assert done.returncode == 0, done.stderr
    runs = {
        "flyteflows.maps.mapped": [10, 20, 30, 40, 50, 60],
        "flyteflows.maps.outer": 5,
        "flyteflows.maps.dynamic_fan": [0, 4, 8],  # compiled with pyflyte's context (_F_SS_C)
        "flyteflows.branches.signs": -2,  # a = 2: the else case, neg(a)
    }
    for name, outputs in runs.items():
        ran = sluice(db, "executions", "create", name, "--wait", "--json")
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["outputs"] == {"o0": outputs}


def _shape(workflow: WorkflowSpec) -> list[tuple[object, ...]]:
    """Nodes, bindings and map options, without what names where the code was found."""
    found: list[tuple[object, ...]] = []
    for node in workflow.nodes:
        task = workflow.tasks[node.task]
        bound = {k: b.model_dump() for k, b in node.inputs.items()}
        extra: object = task.custom.get("template", {}).get("container", {}).get("args")
        if task.type == "map":
            options = map_options(task)
            args = options.task.custom["template"]["container"]["args"]
            extra = (options.model_dump(exclude={"task"}), options.task.name, args)
        found.append((node.id, task.name, task.type, bound, node.upstream, extra))
    return found
