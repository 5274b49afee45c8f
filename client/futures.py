"""What `Producer.send()` returns: one result per batch, one cheap future per record.

As in Kafka (ProduceRequestResult + FutureRecordMetadata), records of a batch share the batch's
result, so a send costs one small object and no per-record event.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple

import trio


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    """-1 with acks=0 (the broker does not answer)."""
    timestamp: int
    """The record's CreateTime in ms."""


class BatchResult:
    """Completion of one batch: base offset or error; wakes waiters and runs callbacks."""

    __slots__ = (
        "_callbacks",
        "_event",
        "base_offset",
        "done",
        "error",
        "partition",
        "record_count",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.record_count = 0
        """Records in the batch (set when it completes)."""
        self.base_offset = -1
        self.error: BaseException | None = None
        self.done = False
        self._event: trio.Event | None = None
        self._callbacks: list[Callable[[BatchResult], None]] | None = None

    def complete(self, base_offset: int, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.base_offset = base_offset
        self.error = error
        self.done = True
        if self._event is not None:
            self._event.set()
        if self._callbacks:
            for callback in self._callbacks:
                callback(self)
            self._callbacks = None

    def add_callback(self, callback: Callable[[BatchResult], None]) -> None:
        if self.done:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    async def wait(self) -> None:
        if not self.done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()


class RecordFuture:
    """Await it for RecordMetadata (or the send's KafkaError). Also: done(), result(),
    add_done_callback(fn) where fn gets this future."""

    __slots__ = ("_batch", "_delta", "timestamp")

    def __init__(self, batch: BatchResult, delta: int, timestamp: int) -> None:
        self._batch = batch
        self._delta = delta
        self.timestamp = timestamp

    def done(self) -> bool:
        return self._batch.done

    @property
    def batch(self) -> BatchResult:
        """The result shared by every record of this record's batch (records of one batch
        complete together; `batch.add_callback` is one callback for all of them)."""
        return self._batch

    def result(self) -> RecordMetadata:
        """The metadata of a completed send; raises its error, or RuntimeError if not done."""
        batch = self._batch
        if not batch.done:
            raise RuntimeError("the record has not been acknowledged yet")
        if batch.error is not None:
            raise batch.error
        offset = -1 if batch.base_offset < 0 else batch.base_offset + self._delta
        return RecordMetadata(batch.topic, batch.partition, offset, self.timestamp)

    def exception(self) -> BaseException | None:
        return self._batch.error if self._batch.done else None

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        self._batch.add_callback(lambda _batch: fn(self))

    async def wait(self) -> RecordMetadata:
        await self._batch.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()
