"""The API's parameters with every limit the server enforces declared in the schema, so a
client (or a schema-driven test) never sends a value the schema allows and the server refuses:
names by their patterns and lengths (spec/names.py), numbers by the ranges the store can hold,
no control character anywhere (guard.py refuses them before any route).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query
from pydantic import BeforeValidator, Field

from sluice.spec.names import ENTITY_MAX, NAMESPACE_MAX, SCOPE_MAX
from sluice.spec.phases import ExecutionPhase
from sluice.spec.values import LARGEST_COUNT

NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
"""Any text without a control character (the guard refuses them in paths and queries)."""
ENTITY = r"^[A-Za-z0-9_][A-Za-z0-9_.<>-]*$"
SCOPE = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
NAMESPACE = r"^[A-Za-z0-9_][A-Za-z0-9_./:-]*$"
LOCK_NAMESPACE = r"^lock:[\x20-\x7e]{1,255}$"
"""Through the API, a lock's name in printable ASCII: the server's printable test is Unicode's,
which a pattern every JSON Schema tool reads cannot state; the route applies this one."""
POSITION = r"^[0-9]{1,9}:[0-9]{1,9}:[0-9]{1,9}$"
ID_MAX = 64
LARGEST_ID = 2**63 - 1
"""The largest event id a 64-bit integer column holds."""

ExecutionId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=ID_MAX,
        pattern=NO_CONTROL,
        description="An execution id, or a prefix of exactly one",
    ),
]
NodeId = Annotated[str, Path(min_length=1, max_length=255, pattern=NO_CONTROL)]
LaunchPlanName = Annotated[str, Path(min_length=1, max_length=ENTITY_MAX, pattern=ENTITY)]
QuotaNamespace = Annotated[
    str,
    Path(
        min_length=1,
        max_length=NAMESPACE_MAX + 5,
        pattern=f"({NAMESPACE})|({LOCK_NAMESPACE})",
        description="A quota namespace, or `lock:<lock name>` for one lock's capacity",
    ),
]
EntityQuery = Annotated[str | None, Query(min_length=1, max_length=ENTITY_MAX, pattern=ENTITY)]
ScopeQuery = Annotated[str | None, Query(min_length=1, max_length=SCOPE_MAX, pattern=SCOPE)]
TextQuery = Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_CONTROL)]
EventId = Annotated[int, Query(ge=0, le=LARGEST_ID, description="An event id (0: from the start)")]
AttemptNumber = Annotated[
    int | None, Query(ge=1, le=LARGEST_COUNT, description="1 for the first; default all")
]
Stream = Annotated[
    Literal["stdout", "stderr"] | None, Query(description="stdout or stderr; default both")
]
LogPosition = Annotated[
    str | None,
    Query(pattern=POSITION, description="`attempt:segment:line`, from a previous page"),
]
PHASE = "^(?i:" + "|".join(p.value for p in ExecutionPhase) + ")$"
PhaseName = Annotated[
    str, Field(json_schema_extra={"pattern": PHASE}, description="An execution phase, any case")
]
"""Checked by the service (its error, the CLI's, lists the phases); the schema says which."""
Cursor = Annotated[
    str | None,
    Query(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_=-]+$", description="From a page"),
]


def a_json_number(value: object) -> object:
    """JSON Schema's integer: a number with no fraction (249.0 is one), never a string or a
    boolean ("5" and true are refused, not converted)."""
    if isinstance(value, str | bool):
        raise ValueError(f"expected a number, got {value!r}")
    return value


JsonInt = Annotated[int, BeforeValidator(a_json_number)]
"""An int in a request body, as JSON Schema means it."""
