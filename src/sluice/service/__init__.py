"""The service layer: the product's verbs (run, create, abort, list and show executions,
logs, launch plans, quotas, locks, cache, concurrency, plugins) over one runtime, returning
typed views. The CLI, the Python API, the HTTP API and the web UI are adapters over it."""

from sluice.service.executions import ExecutionFilter, parse_phases
from sluice.service.facade import Sluice
from sluice.service.inputs import Inputs, InputText
from sluice.service.requests import RunRequest, Scope

__all__ = [
    "ExecutionFilter",
    "InputText",
    "Inputs",
    "RunRequest",
    "Scope",
    "Sluice",
    "parse_phases",
]
