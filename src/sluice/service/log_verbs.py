"""The service's verbs over task logs (sluice/logs/): attempts numbered from 1; an execution
by id or unique prefix, seen within the caller's scope."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from sluice.errors import InvalidArgumentError
from sluice.service import executions as ex
from sluice.service import logs as task_logs
from sluice.service.base import ServiceBase
from sluice.spec.values import check_count


class LogVerbs(ServiceBase):
    async def _log_target(
        self, execution_id: str, node_id: str | None, attempt: int | None
    ) -> tuple[str, int | None]:
        async with self.runtime.store.read() as repos:
            record = await ex.by_id_or_prefix(repos, execution_id, self.scope.projects)
            return record.id, await task_logs.check_target(repos, record, node_id, attempt)

    async def logs(
        self,
        execution_id: str,
        node_id: str | None = None,
        *,
        attempt: int | None = None,
        stream: str | None = None,
        tail: int | None = None,
    ) -> list[task_logs.LogLineView]:
        """Every stored line of an execution (nodes merged by time), a node (attempt by
        attempt) or one attempt, optionally of one stream; only the last `tail` lines if set
        (for a node, only the segments holding them are read)."""
        if tail is not None:
            tail = check_count("tail", tail, InvalidArgumentError, low=0, high=1_000_000)
        found, number = await self._log_target(execution_id, node_id, attempt)
        reader = self.runtime.log_reader()
        return await task_logs.lines(reader, found, node_id, number, stream, tail)

    async def log_page(
        self,
        execution_id: str,
        node_id: str,
        *,
        attempt: int | None = None,
        after: str | None = None,
        limit: int = 1000,
        stream: str | None = None,
    ) -> task_logs.LogPageView:
        """Up to `limit` lines of a node after the position `after` (a previous page's)."""
        limit = check_count("limit", limit, InvalidArgumentError, low=1, high=10_000)
        found, number = await self._log_target(execution_id, node_id, attempt)
        reader = self.runtime.log_reader()
        return await task_logs.page(
            reader, found, node_id, number, after=after, limit=limit, stream=stream
        )

    async def follow_logs(
        self,
        execution_id: str,
        node_id: str | None = None,
        *,
        attempt: int | None = None,
        stream: str | None = None,
    ) -> AsyncIterator[task_logs.LogLineView]:
        """Lines as they are stored, until the execution, node or attempt has ended."""
        found, number = await self._log_target(execution_id, node_id, attempt)
        reader = self.runtime.log_reader()
        async for line in task_logs.follow(reader, found, node_id, number, stream):
            yield line

    def on_task_output(self, listener: task_logs.OutputListener) -> Callable[[], None]:
        """Call `listener` with each line the tasks this process drives print, as they print
        it (live output of `sluice run`); returns the function that stops it."""
        return task_logs.tap(self.runtime.open_task_logs(), listener)
