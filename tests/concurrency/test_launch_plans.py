"""Launch plan versions: register, one ACTIVE version per name, and errors that name the value."""

from __future__ import annotations

import asyncio

import pytest

import sluice
from concurrency.cc_support import load_flows, open_runtime, service
from sluice.errors import DefinitionError, NotFoundError
from sluice.runtime import Runtime

flows = load_flows()


async def states(rt: Runtime, name: str) -> dict[str, str]:
    return {r.version: r.state for r in await service(rt).find(name)}


async def test_register_activate_deactivate(store_url: str) -> None:
    cheap = sluice.LaunchPlan("nightly", flows.napping, concurrency=sluice.ConcurrencyPolicy(1))
    wide = sluice.LaunchPlan("nightly", flows.napping, concurrency=sluice.ConcurrencyPolicy(4))
    async with open_runtime(store_url) as rt:
        lps = service(rt)
        await lps.register(cheap.spec, cheap.workflow.spec)
        await lps.register(cheap.spec, cheap.workflow.spec)  # identical: a no-op
        await lps.register(wide.spec, wide.workflow.spec, activate=True)
        assert await states(rt, "nightly") == {
            cheap.spec.version: "INACTIVE",
            wide.spec.version: "ACTIVE",
        }
        await lps.activate("nightly", cheap.spec.version)
        assert await states(rt, "nightly") == {
            cheap.spec.version: "ACTIVE",
            wide.spec.version: "INACTIVE",
        }
        spec, workflow = await lps.active("nightly")
        assert spec == cheap.spec and workflow == cheap.workflow.spec
        assert (await lps.deactivate("nightly")).version == cheap.spec.version  # type: ignore[union-attr]
        assert set((await states(rt, "nightly")).values()) == {"INACTIVE"}
        with pytest.raises(NotFoundError, match="no ACTIVE version"):
            await lps.active("nightly")
        await lps.activate("nightly")  # the latest registered version by default
        assert (await states(rt, "nightly"))[wide.spec.version] == "ACTIVE"


async def test_concurrent_activations_leave_exactly_one_active(store_url: str) -> None:
    plans = [
        sluice.LaunchPlan("racy", flows.napping, concurrency=sluice.ConcurrencyPolicy(n))
        for n in range(1, 6)
    ]
    async with open_runtime(store_url) as rt:
        for plan in plans:
            await service(rt).register(plan.spec, plan.workflow.spec)
        await asyncio.gather(
            *(service(rt).activate("racy", p.spec.version) for p in plans for _ in range(3)),
            return_exceptions=True,
        )
        assert list((await states(rt, "racy")).values()).count("ACTIVE") == 1


async def test_unknown_names_and_versions_are_errors_that_change_nothing(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        lps = service(rt)
        await lps.register(flows.waiting.spec, flows.waiting.workflow.spec, activate=True)
        before = await states(rt, "waiting")
        with pytest.raises(NotFoundError, match="'v-typo'"):
            await lps.activate("waiting", "v-typo")
        with pytest.raises(NotFoundError, match="'nope'"):
            await lps.activate("nope")
        with pytest.raises(NotFoundError, match="'nope'"):
            await lps.deactivate("nope")
        assert await states(rt, "waiting") == before


async def test_a_version_is_immutable_and_names_its_workflow(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        lps = service(rt)
        spec = flows.waiting.spec
        await lps.register(spec, flows.waiting.workflow.spec)
        changed = spec.model_copy(update={"priority": 9})
        with pytest.raises(DefinitionError, match=spec.version):
            await lps.register(changed, flows.waiting.workflow.spec)
        with pytest.raises(DefinitionError, match="needs_input"):
            await lps.register(spec, flows.needs_input.spec)


async def test_ensure_registered_activates_only_a_name_without_an_active_version(
    store_url: str,
) -> None:
    async with open_runtime(store_url) as rt:
        lps = service(rt)
        await lps.ensure_registered(flows.waiting.spec, flows.waiting.workflow.spec)
        assert await states(rt, "waiting") == {flows.waiting.spec.version: "ACTIVE"}
        await lps.ensure_registered(flows.loose.spec, flows.loose.workflow.spec)
        assert (await states(rt, "waiting"))[flows.loose.spec.version] == "INACTIVE"
