"""Loading user code named as `path/to/file.py:name` or `module:name`."""

from __future__ import annotations

import importlib
import secrets
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice import LaunchPlan, TaskDef, WorkflowDef
from sluice.errors import DefinitionError, NotFoundError
from sluice.sdk.loader import load_module, load_target
from sluice.sdk.naming import module_file, module_name

FLOW = textwrap.dedent(
    """
    from sluice import LaunchPlan, task, workflow

    WHO = {who!r}


    @task
    def double(x: int) -> int:
        return 2 * x


    @workflow
    def wf(x: int) -> int:
        return double(x=x)


    plan = LaunchPlan("plan", wf, default_inputs={{"x": 1}})
    not_runnable = 42
    """
)


@pytest.fixture(autouse=True)
def isolated_imports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Undo what loading does to the interpreter: sys.path entries and modules from tmp_path."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = dict(sys.modules)
    yield
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if name not in before or file.startswith(str(tmp_path)):
            if before.get(name) is not None:
                sys.modules[name] = before[name]
            else:
                del sys.modules[name]


def write_flow(directory: Path, stem: str, who: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.py"
    path.write_text(FLOW.format(who=who or str(directory)), encoding="utf-8")
    return path


def unique(stem: str) -> str:
    return f"{stem}_{secrets.token_hex(4)}"


def test_load_target_from_a_file(tmp_path: Path) -> None:
    path = write_flow(tmp_path, unique("flow"))
    wf = load_target(f"{path}:wf")
    assert isinstance(wf, WorkflowDef)
    assert wf.spec.name == f"{path.stem}.wf"
    assert isinstance(load_target(f"{path}:plan"), LaunchPlan)
    assert isinstance(load_target(f"{path}:double"), TaskDef)


def test_load_target_from_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_flow(tmp_path / "flows", unique("rel"))
    monkeypatch.chdir(tmp_path)
    wf = load_target(f"flows/{path.name}:wf")
    assert isinstance(wf, WorkflowDef)
    assert module_file(wf.fn) == str(path.resolve())


def test_loading_the_same_file_twice_gives_the_same_objects(tmp_path: Path) -> None:
    path = write_flow(tmp_path, unique("again"))
    assert load_target(f"{path}:wf") is load_target(f"{path}:wf")


def test_load_target_from_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stem = unique("importable")
    write_flow(tmp_path / "pkgroot", stem)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgroot"))
    wf = load_target(f"{stem}:wf")
    assert isinstance(wf, WorkflowDef)
    assert wf.name == f"{stem}.wf"
    assert load_target("sluice.sdk.loader:load_target") is load_target


def test_load_target_dotted_attribute(tmp_path: Path) -> None:
    path = write_flow(tmp_path, unique("dotted"))
    assert load_target(f"{path}:wf.name") == f"{path.stem}.wf"


def test_sibling_imports_of_a_loaded_file_work(tmp_path: Path) -> None:
    helper = unique("helper")
    (tmp_path / f"{helper}.py").write_text("FACTOR = 3\n", encoding="utf-8")
    main = tmp_path / f"{unique('main')}.py"
    main.write_text(f"from {helper} import FACTOR\nVALUE = FACTOR * 2\n", encoding="utf-8")
    assert load_target(f"{main}:VALUE") == 6


def test_unknown_name_lists_what_the_module_has(tmp_path: Path) -> None:
    path = write_flow(tmp_path, unique("listing"))
    with pytest.raises(NotFoundError) as caught:
        load_target(f"{path}:wf_typo")
    message = str(caught.value)
    assert "'wf_typo'" in message
    assert "['double', 'plan', 'wf']" in message
    assert "not_runnable" not in message


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "flow.py"
    with pytest.raises(NotFoundError) as caught:
        load_target(f"{missing}:wf")
    assert str(missing) in str(caught.value)


def test_unimportable_module_is_a_not_found_error() -> None:
    with pytest.raises(NotFoundError, match="no_such_module_xyz"):
        load_target("no_such_module_xyz:wf")


@pytest.mark.parametrize("reference", ["flow.py", "wf", ":wf", "flow.py:"])
def test_reference_without_a_target_is_an_error(reference: str) -> None:
    with pytest.raises(NotFoundError, match="does not name a target"):
        load_target(reference)


def test_an_error_in_the_file_is_one_line_and_leaves_no_half_module(tmp_path: Path) -> None:
    stem = unique("broken")
    path = tmp_path / f"{stem}.py"
    path.write_text("raise RuntimeError('boom in user code')\n", encoding="utf-8")
    with pytest.raises(DefinitionError, match=r"cannot load .*RuntimeError: boom in user code"):
        load_target(f"{path}:wf")
    assert stem not in sys.modules


def test_a_file_shadowing_a_loaded_stdlib_module_still_loads(tmp_path: Path) -> None:
    import json

    path = write_flow(tmp_path, "json", who="mine")
    wf = load_target(f"{path}:wf")
    assert isinstance(wf, WorkflowDef)
    assert sys.modules[wf.fn.__module__].WHO == "mine"
    assert sys.modules["json"] is json
    assert hasattr(importlib.import_module("json"), "dumps")


def test_files_with_the_same_stem_load_their_own_code(tmp_path: Path) -> None:
    """Three projects each with a `flows.py` (or a `json.py`): each reference must give the
    objects of its own file, not those of a file loaded earlier under the same stem."""
    stem = unique("flows")
    for stem_name in (stem, "json"):
        seen = []
        for who in ("a", "b", "c"):
            path = write_flow(tmp_path / stem_name / who, stem_name, who=who)
            wf = load_target(f"{path}:wf")
            seen.append(sys.modules[wf.fn.__module__].WHO)
        assert seen == ["a", "b", "c"], stem_name


def test_loading_a_file_does_not_replace_a_stdlib_module_for_everyone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user file named like a stdlib module that is not imported yet (colorsys.py) must not
    become that module for the rest of the process."""
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    path = write_flow(tmp_path, "colorsys", who="mine")
    assert isinstance(load_target(f"{path}:wf"), WorkflowDef)
    colorsys = importlib.import_module("colorsys")
    assert hasattr(colorsys, "rgb_to_hsv"), colorsys.__file__


def test_load_module_by_name_and_file(tmp_path: Path) -> None:
    stem = unique("bymodule")
    path = write_flow(tmp_path, stem)
    module = load_module(stem, str(path))
    assert str(tmp_path) == module.WHO
    assert load_module(stem, str(path)) is module
    assert load_module(stem) is module


def test_module_name_of_a_script_run_as_main_is_its_stem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = "/somewhere/quickstart.py"
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec("def fn():\n    pass\n", namespace)
    assert module_name(namespace["fn"]) == "quickstart"
    assert module_name(test_module_name_of_a_script_run_as_main_is_its_stem) == __name__
