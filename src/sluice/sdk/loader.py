"""Load user code named as `path/to/file.py:name` or `package.module:name`.

A file inside a package (its folder has an `__init__.py`) is imported as that package's
module, as `pyflyte run` does: the package root is the first folder up without an
`__init__.py`, it goes on `sys.path`, and `pkg.sub.module` is imported, so the module's
relative imports (`from .tasks import ...`) work. A file outside any package is loaded alone.

A module that cannot be loaded (a syntax error, a failed import, an exception at import
time) is a DefinitionError of one line naming the file, the line and the exception, never a
traceback: `sluice run` exits 2 with it.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from sluice.errors import DefinitionError, NotFoundError, SluiceError
from sluice.modules import load_module, resolve_attribute

__all__ = ["load_module", "load_target", "package_module", "resolve_attribute"]


def load_target(reference: str) -> Any:
    """`file.py:name` or `pkg.module:name` to the object it names; NotFoundError naming a
    missing file or attribute, DefinitionError naming why the module did not load."""
    location, sep, name = reference.rpartition(":")
    if not sep or not location or not name:
        raise NotFoundError(
            f"{reference!r} does not name a target; use path/to/file.py:workflow or module:workflow"
        )
    module = _loaded(location)
    try:
        return resolve_attribute(module, name)
    except NotFoundError:
        known = sorted(k for k, v in vars(module).items() if _is_runnable(v))
        raise NotFoundError(
            f"{location} has no workflow, launch plan or task {name!r}; it has {known}"
        ) from None


def package_module(path: Path) -> tuple[str, str] | None:
    """(package root, dotted module name) of a file inside a package; None outside one."""
    folder = path.parent
    if not (folder / "__init__.py").is_file():
        return None
    parts = [] if path.name == "__init__.py" else [path.stem]
    while (folder / "__init__.py").is_file() and folder != folder.parent:
        parts.insert(0, folder.name)
        folder = folder.parent
    return str(folder), ".".join(parts)


def _loaded(location: str) -> Any:
    try:
        if not (location.endswith(".py") or "/" in location):
            return load_module(location)
        path = Path(location).resolve()
        if not path.is_file():
            raise NotFoundError(f"file {location!r} does not exist")
        found = package_module(path)
        if found is None:
            return load_module(path.stem, str(path))
        root, dotted = found
        if root not in sys.path:
            sys.path.insert(0, root)
        return load_module(dotted)
    except SluiceError:
        raise
    except (Exception, SystemExit) as exc:  # the user's module raised while it loaded
        raise DefinitionError(f"cannot load {location}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """`ExcType: message (file:line)`, the line being the last frame in user code."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} ({exc.filename}:{exc.lineno})"
    message = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {message[0] if message else ''}".rstrip(": ")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    return f"{text} ({frames[-1].filename}:{frames[-1].lineno})" if frames else text


def _is_runnable(value: Any) -> bool:
    from sluice.sdk.launch_plan import LaunchPlan
    from sluice.sdk.task import TaskDef
    from sluice.sdk.workflow import WorkflowDef

    flytekit = type(value).__module__.startswith("flytekit")  # sluice.flyte translates these
    return isinstance(value, WorkflowDef | LaunchPlan | TaskDef) or (
        flytekit and hasattr(value, "name")
    )
