"""Read what `pyflyte package` (a .tgz) or `pyflyte serialize ... workflows -f DIR` wrote.

Each entity is one protobuf file whose name ends in its kind: `_1.pb` a TaskSpec, `_2.pb` a
WorkflowSpec, `_3.pb` a LaunchPlan. Other members (the fast-registration code archive) are
ignored: the task code must be importable from `source_root` (default: the current directory).
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sluice.errors import DefinitionError, NotFoundError
from sluice.flyte.entities import FlyteEntities, require_flytekit
from sluice.flyte.launch_plans import launch_plan_spec
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec

_KINDS = {"_1.pb": "TaskSpec", "_2.pb": "WorkflowSpec", "_3.pb": "LaunchPlan"}


def read_package(path: str, source_root: str = "") -> FlyteEntities:
    """The entities of a package archive or a directory; NotFoundError naming a missing path."""
    require_flytekit()
    where = Path(path)
    if not where.exists():
        raise NotFoundError(
            f"{path!r} does not exist: give a `pyflyte package` .tgz or a directory"
        )
    entities = FlyteEntities(source_root=str(Path(source_root or ".").resolve()))
    members = _directory(where) if where.is_dir() else _archive(where)
    for name, data in members:
        entities.add(_parse(name, data))
    if not entities.launch_plans:
        raise DefinitionError(f"{path!r} holds no Flyte launch plan (files named *_3.pb)")
    return entities


def launch_plans_of(entities: FlyteEntities) -> list[tuple[WorkflowSpec, LaunchPlanSpec]]:
    """Every launch plan with its workflow, in name order."""
    return [
        launch_plan_spec(entities, entities.launch_plans[n]) for n in sorted(entities.launch_plans)
    ]


def _directory(root: Path) -> Iterator[tuple[str, bytes]]:
    for file in sorted(root.rglob("*.pb")):
        yield file.name, file.read_bytes()


def _archive(file: Path) -> Iterator[tuple[str, bytes]]:
    try:
        with tarfile.open(file) as archive:
            for member in archive:
                name = Path(member.name).name
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is not None and name.endswith(".pb"):
                    yield name, extracted.read()
    except tarfile.TarError as exc:
        raise DefinitionError(f"{str(file)!r} is not a `pyflyte package` archive: {exc}") from None


def _parse(name: str, data: bytes) -> Any:
    from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2

    kinds = {
        "TaskSpec": task_pb2.TaskSpec,
        "WorkflowSpec": workflow_pb2.WorkflowSpec,
        "LaunchPlan": launch_plan_pb2.LaunchPlan,
    }
    kind = next((k for suffix, k in _KINDS.items() if name.endswith(suffix)), None)
    if kind is None:
        raise DefinitionError(f"{name!r}: not a Flyte entity file (*_1.pb, *_2.pb or *_3.pb)")
    try:
        return kinds[kind].FromString(data)
    except Exception as exc:  # protobuf's DecodeError
        raise DefinitionError(f"{name!r} is not a flyteidl {kind}: {exc}") from None
