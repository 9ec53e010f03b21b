"""Flyte workflows on sluice: flytekit tasks, workflows and launch plans -> sluice specs.

flytekit objects are serialized in process (as `pyflyte serialize` does) and the flyteidl
protobufs translated (`translate`), so `sluice run module.py:wf` on a flytekit workflow and
`sluice flyte import` of a `pyflyte package` output share one path. Nothing here imports
flytekit until a flytekit object (or a package) is given: sluice without the `flyte` extra
never loads it.
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install 'sluice[flyte]'"


def is_flytekit_object(target: Any) -> bool:
    """A flytekit task, workflow or launch plan (told apart without importing flytekit)."""
    return type(target).__module__.partition(".")[0] in ("flytekit", "flytekitplugins")
