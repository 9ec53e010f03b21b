"""The Ray Jobs API as sluice uses it: ray's JobSubmissionClient (it uploads a local
working_dir or py_modules of the runtime_env), its blocking calls run in a thread, its errors
translated here once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sluice.errors import PluginUnavailableError, SluiceError

INSTALL_HINT = "the Ray plugin needs ray's Jobs API: pip install 'sluice[ray]'"


class RayClusterError(SluiceError):
    """The cluster's Jobs API could not be reached or refused a request."""


@dataclass(frozen=True)
class JobView:
    """What sluice reads of a job: its status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)
    and Ray's message about it."""

    status: str
    message: str

    @property
    def is_terminal(self) -> bool:
        return self.status in ("SUCCEEDED", "FAILED", "STOPPED")


def _client_class() -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise PluginUnavailableError(f"{INSTALL_HINT} ({exc})") from None
    return JobSubmissionClient


def ray_missing() -> str | None:
    """Why the Jobs API cannot be used here (with the install hint), or None."""
    try:
        _client_class()
    except PluginUnavailableError as exc:
        return str(exc)
    return None


class RayJobs:
    """One cluster's Jobs API, by its dashboard address."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._client: Any = None

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            if self._client is None:
                self._client = _client_class()(self.address)
            return getattr(self._client, method)(*args, **kwargs)

        try:
            return await asyncio.to_thread(call)
        except PluginUnavailableError:
            raise
        except Exception as exc:
            raise RayClusterError(f"Ray cluster at {self.address}: {method}: {exc}") from exc

    async def find(self, submission_id: str) -> JobView | None:
        """The job with that submission id, or None if the cluster has none."""
        try:
            info = await self._call("get_job_info", submission_id)
        except RayClusterError as exc:
            if "does not exist" in str(exc):  # the Jobs API's 404
                return None
            raise
        return JobView(str(getattr(info.status, "value", info.status)), str(info.message or ""))

    async def submit(self, submission_id: str, entrypoint: str, **options: Any) -> bool:
        """Submit the job under `submission_id`; False if a job of that id already exists
        (the cluster refuses a second one: that is what makes submission idempotent)."""
        try:
            await self._call(
                "submit_job", entrypoint=entrypoint, submission_id=submission_id, **options
            )
        except RayClusterError as exc:
            if "already exists" in str(exc):
                return False
            raise
        return True

    async def logs(self, submission_id: str) -> str:
        return str(await self._call("get_job_logs", submission_id))

    async def stop(self, submission_id: str) -> None:
        """Ask the cluster to stop the job; a job that is over or unknown is left as it is."""
        try:
            await self._call("stop_job", submission_id)
        except RayClusterError as exc:
            if "does not exist" not in str(exc):
                raise
