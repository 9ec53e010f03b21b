"""The flyteidl entities of a Flyte project: task specs, workflow specs and launch plans.

They come from serializing flytekit objects in process (`serialize`) or from the files that
`pyflyte package` / `pyflyte serialize` write (`flyte.package`); either way they are the same
protobufs (flyteidl.admin TaskSpec, WorkflowSpec, LaunchPlan), so one translation serves both.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.errors import DefinitionError, MissingDependencyError

PROJECT, DOMAIN, VERSION = "sluice", "local", "sluice"
"""What in-process serialization registers entities under (sluice versions them by content)."""


@dataclass
class FlyteEntities:
    tasks: dict[str, Any] = field(default_factory=dict)  # task name -> admin TaskSpec
    workflows: dict[str, Any] = field(default_factory=dict)  # name -> admin WorkflowSpec
    launch_plans: dict[str, Any] = field(default_factory=dict)  # name -> admin LaunchPlan
    source_root: str = ""
    """The directory the task modules import from ("": each task's own, from `roots`)."""
    roots: dict[str, str] = field(default_factory=dict)
    """Task name -> the directory its module imports from, for tasks serialized here."""
    files: dict[str, str] = field(default_factory=dict)
    """Task name -> its module's file, for tasks serialized here."""

    def root_of(self, task_name: str) -> str:
        return self.source_root or self.roots.get(task_name, "")

    def add(self, message: Any) -> None:
        """Keep a task spec, workflow spec or launch plan; ignore any other message."""
        kind = message.DESCRIPTOR.full_name
        if kind == "flyteidl.admin.TaskSpec":
            self.tasks[message.template.id.name] = message
        elif kind == "flyteidl.admin.WorkflowSpec":
            self.workflows[message.template.id.name] = message
        elif kind == "flyteidl.admin.LaunchPlan":
            self.launch_plans[message.id.name] = message

    def workflow(self, name: str) -> Any:
        found = self.workflows.get(name)
        if found is None:
            raise DefinitionError(
                f"workflow {name!r} is not in the Flyte entities; workflows are "
                f"{sorted(self.workflows)}"
            )
        return found


def require_flytekit() -> None:
    try:
        import flyteidl  # noqa: F401
        import flytekit  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"flytekit is not installed ({exc}); pip install 'sluice[flyte]'"
        ) from None


def serialize(*targets: Any) -> FlyteEntities:
    """Serialize flytekit objects (and what they use) in process, as `pyflyte serialize`."""
    require_flytekit()
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig.auto_default_image(),
        project=PROJECT,
        domain=DOMAIN,
        version=VERSION,
    )
    mapping: OrderedDict[Any, Any] = OrderedDict()
    for target in targets:
        get_serializable(mapping, settings, target)
    entities = FlyteEntities()
    for entity, model in mapping.items():
        to_idl = getattr(model, "to_flyte_idl", None)
        if to_idl is not None:
            entities.add(to_idl())
        # a map_task's module is its mapped task's (what its items import)
        function_task = getattr(entity, "python_function_task", entity)
        if hasattr(function_task, "task_function"):
            entities.roots[entity.name], entities.files[entity.name] = _import_root(function_task)
    return entities


def _import_root(task: Any) -> tuple[str, str]:
    """The directory from which the module flytekit names in the task's command line imports
    (flytekit names it from its package root, which may differ from how sluice loaded it),
    and the module's file."""
    from flytekit.core.tracker import extract_task_module

    _, module, _, file = extract_task_module(task)
    path = Path(file).resolve()
    depth = module.count(".") + (2 if path.name == "__init__.py" else 1)
    return str(path.parents[depth - 1]), str(path)
