"""Loading user code by module name or by file, without letting files replace each other
or the standard library. The bottom layer: the engine, the worker and the SDK use it."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sluice.errors import NotFoundError

PRIVATE_PREFIX = "sluice_file_"


def load_module(module: str, file: str = "") -> ModuleType:
    """Import `module`, or load it from `file` when given. A file is loaded under its own stem
    (the name its tasks carry, see naming.module_name), unless that name is taken by another
    module (a script named json.py): then under a private name derived from its path, so two
    files with one stem, or a file and a standard module, never replace each other."""
    if not file:
        try:
            return sys.modules.get(module) or importlib.import_module(module)
        except ImportError as exc:
            raise NotFoundError(f"cannot import module {module!r}: {exc}") from None
    path = Path(file).resolve()
    for name in (module, private_module_name(module, path)):
        loaded = sys.modules.get(name)
        if loaded is not None and _same_file(loaded, path):
            return loaded
    in_package = _from_package_root(module, path) if "." in module else None
    if in_package is not None:
        return in_package
    taken = module in sys.modules or _importable(module)
    return _load_file(path, private_module_name(module, path) if taken else module)


def _from_package_root(module: str, path: Path) -> ModuleType | None:
    """A module of a package (`pkg.sub.mod`, as `sluice run` and pyflyte import a file inside
    a package): imported by its name from its package root, which `path` must lie under as
    the name says; None when it does not, or when that name is another file's."""
    parts = module.split(".")
    package = path.name == "__init__.py"
    depth = len(parts) - 1 + package
    if depth >= len(path.parents):
        return None
    root = path.parents[depth]
    expected = root.joinpath(*parts, "__init__.py") if package else root.joinpath(*parts)
    if (expected if package else expected.with_suffix(".py")) != path:
        return None
    if str(root) not in sys.path:
        sys.path.append(str(root))  # its package imports; it shadows nothing
    try:
        found = importlib.import_module(module)
    except ImportError:
        return None
    return found if _same_file(found, path) else None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent package is not importable
        return False


def private_module_name(stem: str, path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{PRIVATE_PREFIX}{digest}_{stem}"


def _same_file(module: ModuleType, path: Path) -> bool:
    own = getattr(module, "__file__", None)
    return own is not None and Path(own).resolve() == path


def _load_file(path: Path, name: str) -> ModuleType:
    if not path.is_file():
        raise NotFoundError(f"file {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise NotFoundError(f"cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))  # its sibling imports work; it shadows nothing
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def resolve_attribute(module: ModuleType, qualname: str) -> Any:
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise NotFoundError(f"{module.__name__!r} has no {qualname!r}")
    return target
