"""The agents of the flyte_agent tests, served by the real `pyflyte serve agent --modules
sluice_test_agents`: `countdown` (async: a job that succeeds `seconds` after its creation with
`value * 2`) and `shout` (sync: the upper-cased text). Every call is appended to the ledger
file named by SLUICE_TEST_AGENT_LEDGER (one JSON object a line), so a test counts creates and
deletes on the agent's side; jobs live in that file too, so they outlive nothing but the file.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_agent import (
    AgentRegistry,
    AsyncAgentBase,
    Resource,
    ResourceMeta,
    SyncAgentBase,
)
from flytekit.models.literals import LiteralMap
from flytekit.models.task import TaskTemplate

LEDGER = Path(os.environ.get("SLUICE_TEST_AGENT_LEDGER", "ledger.jsonl"))


def _record(**entry: Any) -> None:
    with LEDGER.open("a") as out:
        out.write(json.dumps({**entry, "at": time.time()}) + "\n")


def _entries() -> list[dict[str, Any]]:
    if not LEDGER.exists():
        return []
    return [json.loads(line) for line in LEDGER.read_text().splitlines() if line]


def _value(inputs: LiteralMap | None, name: str) -> Any:
    assert inputs is not None
    primitive = inputs.literals[name].scalar.primitive
    return primitive.value


@dataclass
class CountdownMeta(ResourceMeta):
    job: str


class CountdownAgent(AsyncAgentBase):
    name = "Countdown Agent"

    def __init__(self) -> None:
        super().__init__(task_type_name="countdown", metadata_type=CountdownMeta)

    def create(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: LiteralMap | None = None,
        task_execution_metadata: Any = None,
        **kwargs: Any,
    ) -> CountdownMeta:
        job = uuid.uuid4().hex
        execution = task_execution_metadata.task_execution_id.node_execution_id.execution_id.name
        _record(op="create", job=job, seconds=_value(inputs, "seconds"),
                value=_value(inputs, "value"), execution=execution)  # fmt: skip
        return CountdownMeta(job=job)

    def get(self, resource_meta: CountdownMeta, **kwargs: Any) -> Resource:
        entries = [e for e in _entries() if e.get("job") == resource_meta.job]
        created = next(e for e in entries if e["op"] == "create")
        _record(op="get", job=resource_meta.job)
        if any(e["op"] == "delete" for e in entries):
            return Resource(phase=TaskExecution.ABORTED, message="deleted")
        if time.time() < created["at"] + created["seconds"]:
            return Resource(phase=TaskExecution.RUNNING, message="counting down")
        return Resource(phase=TaskExecution.SUCCEEDED, outputs={"o0": created["value"] * 2})

    def delete(self, resource_meta: CountdownMeta, **kwargs: Any) -> None:
        _record(op="delete", job=resource_meta.job)


class ShoutAgent(SyncAgentBase):
    name = "Shout Agent"

    def __init__(self) -> None:
        super().__init__(task_type_name="shout")

    def do(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: LiteralMap | None = None,
        **kwargs: Any,
    ) -> Resource:
        text = _value(inputs, "text")
        _record(op="do", text=text)
        return Resource(phase=TaskExecution.SUCCEEDED, outputs={"o0": str(text).upper()})


AgentRegistry.register(CountdownAgent())
AgentRegistry.register(ShoutAgent())
