"""flytekit constructs sluice does not run are refused when translated (at `sluice run` or
`launchplan register`), naming the construct and the node, never with a traceback."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from sluice.errors import DefinitionError
from sluice.runtime import resolve_target
from support.flyte import FLOWS_ROOT


def _refused() -> ModuleType:
    if str(FLOWS_ROOT) not in sys.path:
        sys.path.insert(0, str(FLOWS_ROOT))
    return importlib.import_module("unsupported.refused")


def test_an_echo_of_several_inputs_is_refused_naming_the_node() -> None:
    with pytest.raises(DefinitionError, match=r"node 'n0'.*'two_echo'.*echo task of 2 inputs"):
        resolve_target(_refused().echo_two)


def test_a_sub_workflow_on_failure_is_refused_naming_the_node() -> None:
    with pytest.raises(
        DefinitionError, match=r"node 'n0' \(sub-workflow .*node 'fn0' \(cleanup\).*on_failure"
    ):
        resolve_target(_refused().outer)
