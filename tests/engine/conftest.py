from __future__ import annotations

from collections.abc import AsyncIterator
from types import ModuleType

import pytest

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from support.engine import FLOWS, fast_settings


@pytest.fixture
def flows() -> ModuleType:
    return load_module("flows", str(FLOWS))


@pytest.fixture
async def runtime(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(fast_settings(sqlite_url))
    yield rt
    await rt.close()
