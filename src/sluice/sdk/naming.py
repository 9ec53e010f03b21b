"""Stable names for user code, whether a file runs as __main__ or is loaded by sluice."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from sluice.modules import PRIVATE_PREFIX


def module_name(obj: Any) -> str:
    """The module name of a function or class; a script's __main__ becomes its file stem, so a
    task has the same name run as `python flow.py` or `sluice run flow.py:wf`."""
    name: str = obj.__module__
    if name.startswith(PRIVATE_PREFIX):  # modules.private_module_name: keep the file's stem
        return name.split("_", 3)[3]
    if name == "__main__":
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if main_file:
            return Path(main_file).stem
    return name


def module_file(obj: Any) -> str:
    """The file a function was defined in, when its module was loaded from a file."""
    module = sys.modules.get(obj.__module__)
    file = getattr(module, "__file__", None)
    return str(Path(file).resolve()) if file else ""
