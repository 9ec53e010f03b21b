"""Creating a sluice execution of a registered Flyte launch plan (or task), as flyteadmin's
CreateExecution does: an ordinary sluice execution (quotas, concurrency policies, cache
reservations, logs, the UI), whose id is the Flyte execution name, so that a client that
names its execution and sends the request again finds the one it created (AlreadyExistsError)
instead of starting a second one.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from sluice.errors import AlreadyExistsError, InputError, InvalidArgumentError
from sluice.executions.launch import claim_limits, create_execution
from sluice.faults import crash_point
from sluice.ids import new_execution_id
from sluice.plugins.builtin.flyte_literals import to_json
from sluice.runtime import Runtime
from sluice.service.flyte.code import FlyteFiles
from sluice.service.flyte.graph import FlyteId
from sluice.service.flyte.registry import check_id
from sluice.service.flyte.translate import translate
from sluice.store.flyte_entities import FlyteEntityRepository
from sluice.store.records import ExecutionRecord

FLYTE_OPTION = "flyte"
"""The key of an execution's options naming the Flyte entity it runs: [kind, project,
domain, name, version]."""
_EXECUTION_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")


def check_execution_name(name: str) -> str:
    if not _EXECUTION_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"execution name {name!r}: 1 to 63 lower-case letters, digits and '-', starting "
            "with a letter, expected"
        )
    return name


async def create(
    runtime: Runtime,
    files: FlyteFiles,
    project: str,
    domain: str,
    name: str,
    target: FlyteId,
    inputs: Any,
    *,
    overwrite_cache: bool = False,
) -> ExecutionRecord:
    """Launch `target` with `inputs` (a flyteidl LiteralMap) in project/domain as the
    execution `name` ("": a new name). AlreadyExistsError if the name is taken."""
    check_id(target)
    execution_id = check_execution_name(name) if name else new_execution_id()
    async with runtime.store.read() as repos:
        translated = await translate(FlyteEntityRepository(repos.conn), files, target)
    values = _values(inputs, translated.interface)
    for distribution in sorted(translated.distributions):
        await asyncio.to_thread(files.unpack, distribution)
    await runtime.check_tasks(translated.workflow, None)
    options: dict[str, Any] = {FLYTE_OPTION: _option(target)}
    if overwrite_cache:
        options["overwrite_cache"] = True
    record = await create_execution(
        runtime.store,
        runtime.notifier,
        runtime.clock,
        project=project,
        domain=domain,
        workflow=translated.workflow,
        inputs=values,
        launch_plan=translated.launch_plan,
        options=options,
        execution_id=execution_id,
        limits=claim_limits(runtime.resources, runtime.settings.resources),
    )
    # The Flyte execution name is this create's idempotency key: it is the execution's id,
    # so a client that resends a named create after a lost reply gets ALREADY_EXISTS and
    # follows the execution it made (flytekit's clients name every execution they create).
    # flyteadmin's request carries no other request id; an unnamed create is not deduplicated.
    crash_point("flyte.after_create")
    if record is None:
        raise AlreadyExistsError(f"execution {execution_id!r} exists already")
    return record


def _option(target: FlyteId) -> list[str]:
    return [target.kind, target.project, target.domain, target.name, target.version]


def target_of(record: ExecutionRecord) -> FlyteId | None:
    """The Flyte entity an execution created through the gRPC API runs."""
    found = record.options.get(FLYTE_OPTION)
    if not isinstance(found, list) or len(found) != 5:
        return None
    return FlyteId(*found)


def _values(inputs: Any, interface: Any) -> dict[str, Any]:
    variables = interface.inputs.variables
    values = {}
    for name, literal in inputs.literals.items():
        if name not in variables:
            raise InputError(f"no input {name!r}; inputs are {sorted(variables)}")
        values[name] = to_json(literal, variables[name].type, f"input {name!r}")
    return values
