"""SQLAlchemy's asyncio engine without its ORM.

`sqlalchemy.ext.asyncio`'s package module imports the ORM (its `AsyncSession`), 60-150 ms of
a command's start-up on this machine; the store uses only the engine, the connection and
the results (`sqlalchemy.ext.asyncio.engine`/`.result`), which do not need it. Before a
command's imports, `defer_asyncio_orm()` registers the package with those names only; any
other name (`AsyncSession`, `async_sessionmaker`, ...) runs the package's real `__init__` on
first use, so every import of it still works as documented.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

_PACKAGE = "sqlalchemy.ext.asyncio"
_WITHOUT_ORM = {
    "engine": (
        "AsyncConnection",
        "AsyncEngine",
        "AsyncTransaction",
        "async_engine_from_config",
        "create_async_engine",
        "create_async_pool_from_url",
    ),
    "result": ("AsyncMappingResult", "AsyncResult", "AsyncScalarResult", "AsyncTupleResult"),
}


def defer_asyncio_orm() -> None:
    """Register `sqlalchemy.ext.asyncio` without its ORM half, unless it is imported already.
    Any surprise in SQLAlchemy's layout leaves the package to its normal import."""
    if _PACKAGE in sys.modules:
        return
    import sqlalchemy.ext

    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)
    sys.modules[_PACKAGE] = package
    try:
        for submodule, names in _WITHOUT_ORM.items():
            module = importlib.import_module(f"{_PACKAGE}.{submodule}")
            for name in names:
                setattr(package, name, getattr(module, name))
    except (ImportError, AttributeError):
        del sys.modules[_PACKAGE]
        for submodule in _WITHOUT_ORM:
            sys.modules.pop(f"{_PACKAGE}.{submodule}", None)
        return
    setattr(package, "__getattr__", _completing(package, spec.loader))  # noqa: B010
    setattr(sqlalchemy.ext, "asyncio", package)  # noqa: B010


def _completing(package: ModuleType, loader: Any) -> Any:
    """The package's `__getattr__` (PEP 562): runs its real `__init__` once, then answers."""

    def complete(name: str) -> Any:
        if "__getattr__" in vars(package):
            del package.__getattr__
            loader.exec_module(package)
        try:
            return vars(package)[name]
        except KeyError:
            raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}") from None

    return complete
