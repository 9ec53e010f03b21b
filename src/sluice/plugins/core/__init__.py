"""Plugin machinery core: the contract between the engine and every plugin."""

from sluice.plugins.core.context import (
    LogStream,
    OutputWriter,
    PluginStateReader,
    PluginStateWriter,
    SecretManager,
    SetupContext,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskLogWriter,
)
from sluice.plugins.core.phase import (
    UNKNOWN_TRANSITION,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    TaskInfo,
    TaskLog,
    Transition,
    TransitionType,
)
from sluice.plugins.core.plugin import Plugin, PluginEntry, PluginLoader, PluginProperties
from sluice.plugins.core.registry import ENTRY_POINT_GROUP, PluginRegistry, discover_entry_points

__all__ = [
    "ENTRY_POINT_GROUP",
    "UNKNOWN_TRANSITION",
    "ErrorKind",
    "ExecutionError",
    "LogStream",
    "OutputWriter",
    "Phase",
    "PhaseInfo",
    "Plugin",
    "PluginEntry",
    "PluginLoader",
    "PluginProperties",
    "PluginRegistry",
    "PluginStateReader",
    "PluginStateWriter",
    "SecretManager",
    "SetupContext",
    "TaskExecutionContext",
    "TaskExecutionMetadata",
    "TaskInfo",
    "TaskLog",
    "TaskLogWriter",
    "Transition",
    "TransitionType",
    "discover_entry_points",
]
