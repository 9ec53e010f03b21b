"""Taking an object down: delete it, apply a plugin's abort change, remove sluice's finalizer.

Every operation is idempotent: an object that is already gone is a success.
"""

from __future__ import annotations

import contextlib
import copy
import random

from sluice.clock import Clock
from sluice.plugins.k8s.client import KubeClient
from sluice.plugins.k8s.config import FinalizerBackoff
from sluice.plugins.k8s.errors import KubeApiError, KubeConflictError, KubeNotFoundError
from sluice.plugins.k8s.metadata import FINALIZER
from sluice.plugins.k8s.objects import Manifest, ObjectRef, meta
from sluice.plugins.k8s.plugin import AbortBehavior


class ObjectCleaner:
    def __init__(
        self, client: KubeClient, clock: Clock, backoff: FinalizerBackoff, rng: random.Random
    ) -> None:
        self._client, self._clock, self._backoff, self._rng = client, clock, backoff, rng

    async def delete(self, ref: ObjectRef) -> None:
        with contextlib.suppress(KubeNotFoundError):
            await self._client.delete(ref)

    async def abort(self, ref: ObjectRef, behavior: AbortBehavior) -> None:
        """Patch or update the object as asked, and delete it if asked or if that failed and
        `delete_on_error` is set."""
        changed = True
        if behavior.patch is not None or behavior.update is not None:
            changed = await self._change(ref, behavior)
        if behavior.delete or not changed:
            await self.delete(ref)

    async def remove_finalizer(self, ref: ObjectRef) -> None:
        """Remove sluice's finalizer; on Conflict (the object moved on between our read and
        our patch) back off and try again, raising the Conflict once retries run out."""
        delays = self._backoff.delays(self._rng)
        while True:
            try:
                await self._drop_finalizer(ref)
                return
            except KubeConflictError:
                delay = next(delays, None)
                if delay is None:
                    raise
                await self._clock.sleep(delay)

    async def _drop_finalizer(self, ref: ObjectRef) -> None:
        try:
            current = meta(await self._client.get(ref))  # fresh: its version is a precondition
            finalizers = list(current.get("finalizers") or [])
            if FINALIZER not in finalizers:
                return
            rest = [name for name in finalizers if name != FINALIZER]
            patch = {"finalizers": rest, "resourceVersion": current.get("resourceVersion")}
            await self._client.patch(ref, {"metadata": patch})
        except KubeNotFoundError:
            return

    async def _change(self, ref: ObjectRef, behavior: AbortBehavior) -> bool:
        """False when the change failed and deletion should follow instead."""
        try:
            if behavior.patch is not None:
                await self._client.patch(ref, behavior.patch)
            elif behavior.update is not None:
                await self._client.update(addressed(behavior.update, ref))
        except KubeNotFoundError:
            return True
        except KubeApiError:
            if not behavior.delete_on_error:
                raise
            return False
        return True


def addressed(manifest: Manifest, ref: ObjectRef) -> Manifest:
    """A copy of `manifest` with the object's name and namespace where it has none."""
    result = copy.deepcopy(manifest)
    result.setdefault("metadata", {}).setdefault("name", ref.name)
    result["metadata"].setdefault("namespace", ref.namespace)
    return result
