"""A small synchronous facade for scripts: trio runs in a background thread.

    with SyncProducer(bootstrap_servers="localhost:9092") as producer:
        producer.send("events", b"hello").result(timeout=10)

Each Sync* object owns one thread running `trio.run`; its methods are the async client's,
called through `trio.from_thread.run` and blocking until they return. Errors are re-raised in
the caller's thread unchanged (KafkaError and friends).
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import trio

from client.admin import (
    Admin,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from client.consumer import Consumer, OffsetAndTimestamp
from client.fetched_records import ConsumerRecord
from client.futures import RecordFuture, RecordMetadata
from client.producer import Headers, Producer
from protocol.names import TopicPartition

T = TypeVar("T")


class _Portal:
    """A thread running trio with one async client object opened inside it."""

    def __init__(self, factory: Callable[[], Any], name: str) -> None:
        self._factory = factory
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self.obj: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced to the constructor's caller
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        obj = self._factory()
        await obj.start()
        self.obj = obj
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            with trio.CancelScope(shield=True):
                await obj.close()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self._token is None or not self._thread.is_alive():
            raise RuntimeError("the client is closed")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        if self._token is None or not self._thread.is_alive():
            raise RuntimeError("the client is closed")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def close(self, before: Callable[[], Awaitable[None]] | None = None) -> None:
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if before is not None:
                await before()
            assert self._stop is not None
            self._stop.set()

        trio.from_thread.run(stop, trio_token=self._token)
        self._thread.join()


class _SyncBase:
    _portal: _Portal

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._portal.close()


class SyncProducer(_SyncBase):
    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        producer = Producer(config, **overrides)  # bad configs raise here, in the caller
        self._portal = _Portal(lambda: producer, "trioka-producer")
        self._producer: Producer = self._portal.obj

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers = (),
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; the returned Future's result() is its RecordMetadata."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        async def send() -> None:
            future: RecordFuture = await self._producer.send(
                topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
            )

            def done(f: RecordFuture) -> None:
                error = f.exception()
                if error is not None:
                    result.set_exception(error)
                else:
                    result.set_result(f.result())

            future.add_done_callback(done)

        self._portal.call(send)
        return result

    def flush(self) -> None:
        self._portal.call(self._producer.flush)

    def partitions_for(self, topic: str) -> list[int]:
        return self._portal.call(self._producer.partitions_for, topic)

    def close(self, timeout_ms: float | None = None) -> None:
        self._portal.close(lambda: self._producer.close(timeout_ms=timeout_ms))


class SyncConsumer(_SyncBase):
    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        consumer = Consumer(config, **overrides)
        self._portal = _Portal(lambda: consumer, "trioka-consumer")
        self._consumer: Consumer = self._portal.obj

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._portal.call_sync(self._consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._portal.call_sync(self._consumer.assignment)

    def subscribe(self, topics: Iterable[str], listener: Any = None) -> None:
        """Join the group (group.id) for `topics`; `listener` is a ConsumerRebalanceListener
        (its methods run on the consumer's trio thread)."""
        self._portal.call_sync(self._consumer.subscribe, list(topics), listener)

    def unsubscribe(self) -> None:
        self._portal.call(self._consumer.unsubscribe)

    def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        self._portal.call(self._consumer.commit, offsets)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return self._portal.call(self._consumer.committed, list(partitions))

    def seek(
        self, tp: TopicPartition | tuple[str, int], offset: int, *, leader_epoch: int | None = None
    ) -> None:
        self._portal.call_sync(
            functools.partial(self._consumer.seek, leader_epoch=leader_epoch), tp, offset
        )

    def seek_to_beginning(self, *tps: TopicPartition | tuple[str, int]) -> None:
        self._portal.call_sync(self._consumer.seek_to_beginning, *tps)

    def seek_to_end(self, *tps: TopicPartition | tuple[str, int]) -> None:
        self._portal.call_sync(self._consumer.seek_to_end, *tps)

    def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        return self._portal.call(self._consumer.position, tp)

    def poll(
        self, timeout_ms: float = 0, *, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        async def poll() -> list[ConsumerRecord]:
            return await self._consumer.poll(timeout_ms, max_records=max_records)

        return self._portal.call(poll)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._portal.call(self._consumer.offsets_for_times, timestamps)

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.call(self._consumer.beginning_offsets, list(tps))

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.call(self._consumer.end_offsets, list(tps))

    def partitions_for(self, topic: str) -> list[int]:
        return self._portal.call(self._consumer.partitions_for, topic)


class SyncAdmin(_SyncBase):
    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        admin = Admin(config, **overrides)
        self._portal = _Portal(lambda: admin, "trioka-admin")
        self._admin: Admin = self._portal.obj

    def list_groups(self) -> list[Any]:
        return self._portal.call(self._admin.list_groups)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        return self._portal.call(self._admin.describe_groups, list(group_ids))

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, Any]:
        wanted = None if partitions is None else list(partitions)
        return self._portal.call(self._admin.list_group_offsets, group_id, wanted)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any]) -> None:
        self._portal.call(self._admin.alter_group_offsets, group_id, dict(offsets))

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[CreatedTopic]:
        async def call() -> list[CreatedTopic]:
            return await self._admin.create_topics(topics, validate_only=validate_only)

        return self._portal.call(call)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> CreatedTopic:
        return self._portal.call(
            self._admin.create_topic, name, num_partitions, replication_factor, configs
        )

    def delete_topics(self, names: Iterable[str]) -> None:
        self._portal.call(self._admin.delete_topics, list(names))

    def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        async def call() -> None:
            await self._admin.create_partitions(
                new_partitions, assignments, validate_only=validate_only
            )

        self._portal.call(call)

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        async def call() -> list[str]:
            return await self._admin.list_topics(include_internal=include_internal)

        return self._portal.call(call)

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        return self._portal.call(
            self._admin.describe_topics, None if names is None else list(names)
        )

    def describe_cluster(self) -> ClusterDescription:
        return self._portal.call(self._admin.describe_cluster)

    def describe_configs(
        self, resources: Sequence[ConfigResource]
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        return self._portal.call(self._admin.describe_configs, list(resources))

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[tuple[str, AlterConfigOp, str | None]]],
        *,
        validate_only: bool = False,
    ) -> None:
        async def call() -> None:
            await self._admin.incremental_alter_configs(changes, validate_only=validate_only)

        self._portal.call(call)
