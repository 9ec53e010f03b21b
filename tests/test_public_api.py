"""The public API is exactly `sluice.__all__`: adding or removing a name is a deliberate change
made here too."""

from __future__ import annotations

import inspect
import subprocess
import sys

import sluice

EXPECTED_ALL = [
    "Cache",
    "ConcurrencyBehavior",
    "ConcurrencyPolicy",
    "Directory",
    "DynamicDef",
    "File",
    "LaunchPlan",
    "Locks",
    "MapTask",
    "Quota",
    "RateLimit",
    "Schedule",
    "SluiceError",
    "TaskDef",
    "WorkflowDef",
    "__version__",
    "current_fencing_token",
    "dynamic",
    "main",
    "map",
    "run",
    "task",
    "workflow",
]


def test_all_is_exactly_the_curated_list() -> None:
    assert sorted(sluice.__all__) == sorted(EXPECTED_ALL)
    assert len(sluice.__all__) == len(set(sluice.__all__)), "a name is exported twice"


def test_every_exported_name_resolves() -> None:
    for name in sluice.__all__:
        assert getattr(sluice, name, None) is not None, name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from sluice import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(EXPECTED_ALL)


def test_nothing_private_is_exported() -> None:
    for name in sluice.__all__:
        is_dunder = name.startswith("__") and name.endswith("__")
        assert is_dunder or not name.startswith("_"), name
        value = getattr(sluice, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.split(".")[0] == "sluice", f"{name} is from {value.__module__}"
            assert not any(part.startswith("_") for part in value.__module__.split(".")), name


def test_version_is_a_string_matching_the_package() -> None:
    from importlib.metadata import version

    assert isinstance(sluice.__version__, str)
    assert sluice.__version__ == version("sluice")


def test_errors_share_one_root() -> None:
    from sluice import errors

    classes = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value)
        and issubclass(value, Exception)
        and value.__module__ == errors.__name__
    ]
    assert len(classes) > 10
    for cls in classes:
        assert issubclass(cls, sluice.SluiceError), cls


def test_importing_sluice_stays_light() -> None:
    """`import sluice` loads the SDK only: no engine, store, CLI, database driver or plugin."""
    code = (
        "import sys, sluice; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sluice', 'sqlalchemy', 'alembic', 'psycopg', 'redis', 'click', 'rich'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = [
        m
        for m in loaded
        if m.split(".")[0] != "sluice"
        or m.startswith(("sluice.engine", "sluice.store", "sluice.cli", "sluice.plugins"))
    ]
    assert heavy == []
