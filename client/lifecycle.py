"""Start and stop, shared by Producer, Consumer and Admin.

A client owns a nursery for its background tasks (connections, the producer's sender), a
ClusterClient that has reached a bootstrap server once `start()` returns, and `async with`
support. Subclasses add background tasks in `_on_started` and may extend `close`.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import trio

from client.cluster import ClusterClient


class ClientBase:
    _auto_create_topics = False
    """Whether Metadata requests ask the broker to create unknown topics."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._stack: AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None
        self._cluster: ClusterClient | None = None
        self._closed = False

    async def start(self) -> None:
        """Connect to a bootstrap server (raises if none answers) and start background tasks."""
        if self._stack is not None:
            return
        stack = AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        self._stack, self._nursery = stack, nursery
        self._cluster = ClusterClient(self.config, nursery)
        self._cluster.allow_auto_topic_creation = self._auto_create_topics
        try:
            await self._cluster.refresh_metadata(())
        except BaseException:
            self._closed = True
            nursery.cancel_scope.cancel()
            await stack.aclose()
            raise
        self._on_started(nursery)

    def _on_started(self, nursery: trio.Nursery) -> None:
        """Start the subclass's background tasks."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._stack is None or self._closed:
            return
        self._closed = True
        await self._stop()

    async def _stop(self) -> None:
        """Cancel the background tasks, close every connection and leave the nursery."""
        assert self._stack is not None and self._nursery is not None and self._cluster is not None
        self._nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await self._cluster.aclose()
        await self._stack.aclose()
