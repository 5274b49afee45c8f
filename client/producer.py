"""The trio Producer: Kafka's configs, partitioners, batching, retries and delivery timeout.

    async with Producer(bootstrap_servers="localhost:9092", acks="1") as producer:
        future = await producer.send("events", b"value", key=b"key")
        metadata = await future          # RecordMetadata(topic, partition, offset, timestamp)

`send()` only blocks (up to max.block.ms) for the topic's metadata or for buffer.memory; the
sender task drains ready batches into one Produce request per broker and keeps up to
max.in.flight.requests.per.connection of them unanswered per connection.

With enable.idempotence (the default, as Kafka 3) the sender first asks InitProducerId for a
producer id and epoch, and every batch carries them and its partition's sequence numbers
(client.idempotence has the rules), so the leader answers a retry of an appended batch with
its original offsets instead of appending it twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import structlog
import trio

from client.accumulator import ProducerBatch, RecordAccumulator, record_size
from client.cluster import backoff_ms, now_ms
from client.config import producer_config
from client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OutOfOrderSequenceError,
)
from client.failpoints import LOSE_PRODUCE_RESPONSE, Failpoints
from client.futures import RecordFuture, RecordMetadata
from client.idempotence import IdempotenceManager
from client.lifecycle import ClientBase
from client.partitioner import StickyPartitioner, partition_for_key
from client.sasl import SaslAuthenticationError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from protocol.names import TopicPartition
from protocol.record_batch import HEADER_SIZE, NO_SEQUENCE, Compression

log = structlog.get_logger("client.producer")

Headers = Sequence[tuple[str, bytes]]

_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

_SEQUENCE_ERRORS = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
    }
)
"""The leader's producer state does not match ours: the batch fails and the id is reset."""

_MAYBE_WRITTEN = frozenset(
    {
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
"""Partition answers after which the batch may be in the leader's log (appended, then not
replicated in time): its outcome is unknown until a retry is answered."""


class Producer(ClientBase):
    """A Kafka-style producer. Use as `async with Producer(...) as p:` (or `await start()` /
    `await close()` from inside a task that outlives it)."""

    # Kafka's producer lets the broker auto-create the topics it sends to (when the broker has
    # auto.create.topics.enable).
    _auto_create_topics = True

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        failpoints: Failpoints | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(producer_config(config, **overrides))
        self._failpoints = failpoints
        """client.failpoints (None: all off, as always outside tests)."""
        c = self.config
        self._acks: int = c["acks"]
        self._batch_size: int = c["batch.size"]
        self._max_request_size: int = c["max.request.size"]
        self._buffer_memory: int = c["buffer.memory"]
        self._max_block_ms: float = c["max.block.ms"]
        self._retries: int = c["retries"]
        self._delivery_timeout_ms: float = c["delivery.timeout.ms"]
        self._request_timeout_ms: float = c["request.timeout.ms"]
        self._ignore_keys: bool = c["partitioner.ignore.keys"]
        self._idempotence = IdempotenceManager() if c["enable.idempotence"] else None
        self._producer_id_pending = False
        self._leaderless_warned: set[TopicPartition] = set()
        self._connecting: set[int] = set()
        """Nodes a `_connect` task is connecting to (one at a time per node)."""
        self._fatal_error: KafkaError | None = None
        """Set when the producer can no longer send (no producer id to be had)."""
        self._accumulator = RecordAccumulator(
            batch_size=self._batch_size,
            linger_ms=c["linger.ms"],
            compression=Compression.from_name(c["compression.type"]),
            delivery_timeout_ms=self._delivery_timeout_ms,
            clock_ms=lambda: now_ms(),  # the producer's one clock (tests move it)
            idempotence=self._idempotence,
        )
        self._sticky = StickyPartitioner(
            self._batch_size,
            adaptive=c["partitioner.adaptive.partitioning.enable"],
            available=self._available_partitions,
            queue_size=self._queue_size,
        )
        self._num_partitions: dict[str, int] = {}
        self._tps: dict[tuple[str, int], TopicPartition] = {}
        self._wakeup = trio.Event()
        self._memory_freed = trio.Event()
        self._all_done = trio.Event()
        self._sender_done = trio.Event()

    # -- lifecycle ----------------------------------------------------------------------------

    def _on_started(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._sender)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(timeout_ms=None if exc_type is None else 0)

    async def close(self, timeout_ms: float | None = None) -> None:
        """Send what is buffered (waiting up to `timeout_ms`; None: until each record succeeded
        or failed, at most delivery.timeout.ms) then stop. With 0 buffered records fail at once."""
        if self._stack is None or self._closed:
            return
        self._closed = True
        try:
            with trio.move_on_after(float("inf") if timeout_ms is None else timeout_ms / 1000):
                await self.flush()
        finally:
            self._accumulator.closing = True
            for batch in self._accumulator.abort_all():
                self._accumulator.complete(batch, -1, ClientClosedError("producer"))
            try:
                await self._stop()
            finally:
                # Requests cut short by the cancellation never got an answer.
                for batch in list(self._accumulator.incomplete):
                    self._accumulator.complete(batch, -1, ClientClosedError("producer"))

    # -- sending ------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers = (),
    ) -> RecordFuture:
        """Queue a record; returns a future of its RecordMetadata. Blocks up to max.block.ms
        for the topic's metadata or for room in buffer.memory."""
        if self._closed or self._cluster is None:
            raise ClientClosedError("producer")
        if self._fatal_error is not None:
            raise self._fatal_error
        count = self._num_partitions.get(topic)
        if count is None:
            count = await self._wait_on_metadata(topic)
        size = record_size(key, value, headers)
        if size + HEADER_SIZE > self._max_request_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size} bytes, larger than max.request.size "
                f"({self._max_request_size})",
            )
        if partition is None:
            if key is not None and not self._ignore_keys:
                partition = partition_for_key(key, count)
            else:
                partition = self._sticky.partition(topic, count)
        elif not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic {topic!r} does not exist "
                f"(it has {count} partitions)",
            )
        acc = self._accumulator
        if acc.buffered_bytes + size > self._buffer_memory:
            await self._wait_for_memory(size)
        tp = self._tps.get((topic, partition))
        if tp is None:
            tp = self._tps[(topic, partition)] = TopicPartition(topic, partition)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        future, wake = acc.append(tp, ts, key, value, headers, size)
        if key is None or self._ignore_keys:
            self._sticky.on_append(topic, partition, size, count)
        if wake:
            self._wakeup.set()
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers = (),
    ) -> RecordMetadata:
        """send() and wait for the acknowledgement."""
        future = await self.send(
            topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers
        )
        return await future

    async def flush(self) -> None:
        """Send everything buffered now and wait until each record succeeded or failed."""
        if self._stack is None:
            return
        acc = self._accumulator
        waiting = list(acc.incomplete)
        if not waiting:
            return
        acc.flushing = True
        self._wake()
        try:
            for batch in waiting:
                await batch.result.wait()
        finally:
            acc.flushing = False

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of `topic` (waits for metadata up to max.block.ms)."""
        count = self._num_partitions.get(topic)
        if count is None:
            count = await self._wait_on_metadata(topic)
        return list(range(count))

    def _available_partitions(self, topic: str) -> tuple[int, ...]:
        return () if self._cluster is None else self._cluster.metadata.available_partitions(topic)

    def _queue_size(self, topic: str, partition: int) -> int:
        return self._accumulator.queue_size(TopicPartition(topic, partition))

    async def _wait_on_metadata(self, topic: str) -> int:
        assert self._cluster is not None
        count = await self._cluster.wait_for_topic(
            topic, now_ms() + self._max_block_ms, f"{self._max_block_ms:.0f} ms (max.block.ms)"
        )
        self._num_partitions[topic] = count
        return count

    async def _wait_for_memory(self, size: int) -> None:
        acc = self._accumulator
        if size > self._buffer_memory:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size} bytes, larger than buffer.memory ({self._buffer_memory})",
            )
        with trio.move_on_after(self._max_block_ms / 1000):
            while acc.buffered_bytes + size > self._buffer_memory:
                self._wake()
                await self._memory_freed.wait()
            return
        raise KafkaTimeoutError(
            f"failed to allocate {size} bytes within {self._max_block_ms:.0f} ms (max.block.ms); "
            f"buffer.memory is {self._buffer_memory} and {acc.buffered_bytes} bytes are waiting"
        )

    def _wake(self) -> None:
        self._wakeup.set()

    # -- the sender task ----------------------------------------------------------------------

    async def _sender(self) -> None:
        cluster = self._cluster
        acc = self._accumulator
        assert cluster is not None and self._nursery is not None
        leader_for = cluster.metadata.leader_for
        while True:
            now = now_ms()
            for batch in acc.expired(now):
                self._fail(batch, self._expiry_error(batch, now))
            idem = self._idempotence
            if idem is not None and not idem.has_producer_id and acc.has_queued():
                if self._fatal_error is not None:
                    for batch in acc.abort_all():
                        self._fail(batch, self._fatal_error)
                elif not self._producer_id_pending:
                    self._producer_id_pending = True
                    self._nursery.start_soon(self._init_producer_id)
            check = acc.ready(cluster.metadata.leader_for, now)
            self._warn_leaderless(check.leaderless)
            if check.unknown_leaders:
                cluster.topics.update(check.unknown_leaders)
                cluster.request_update()
            if cluster.needs_update():
                self._nursery.start_soon(self._refresh_metadata)
            sendable = []
            reconnect_ms = float("inf")
            for node in check.ready_nodes:
                conn = cluster.connection_if_ready(node)
                if conn is None:
                    # One connect per node at a time, none while it backs off (Kafka's
                    # NetworkClient.ready): the sender sleeps until the backoff ends.
                    wait_ms = cluster.connection_delay_ms(node)
                    if wait_ms > 0:
                        reconnect_ms = min(reconnect_ms, wait_ms)
                    elif node not in self._connecting:
                        self._connecting.add(node)
                        self._nursery.start_soon(self._connect, node)
                elif conn.can_send:
                    sendable.append(node)
            if sendable:
                leader_for = cluster.metadata.leader_for
                drained = acc.drain(leader_for, sendable, self._max_request_size, now)
                for node, batches in drained.items():
                    self._nursery.start_soon(self._send_batches, node, batches)
                if drained:
                    await trio.lowlevel.checkpoint()
                    continue
            delay = min(check.next_check_ms, reconnect_ms)
            if cluster.update_requested():
                # Until the refresh backoff lets the wanted refresh start (one under way wakes
                # the sender when it ends).
                delay = min(delay, cluster.refresh_delay_ms() or cluster.retry_backoff_ms)
            self._wakeup = trio.Event()
            with trio.move_on_after(max(delay, 0.0) / 1000 if delay != float("inf") else 1.0):
                await self._wakeup.wait()

    def _warn_leaderless(self, partitions: set[TopicPartition]) -> None:
        """Warn once per partition whose batches wait for a leader, saying why it has none
        (again only after it had a leader once more)."""
        assert self._cluster is not None
        metadata = self._cluster.metadata
        if self._leaderless_warned:
            self._leaderless_warned = {
                tp for tp in self._leaderless_warned if metadata.leader_for(*tp) is None
            }
        for tp in partitions - self._leaderless_warned:
            if metadata.num_partitions(tp.topic) is None:
                continue  # not in metadata yet: the first refresh is still under way
            self._leaderless_warned.add(tp)
            log.warning(
                "partition has no leader; its records wait for one (up to delivery.timeout.ms)",
                tp=str(tp),
                reason=metadata.no_leader_reason(tp.topic, tp.partition),
                delivery_timeout_ms=self._delivery_timeout_ms,
            )

    async def _init_producer_id(self) -> None:
        """InitProducerId from any broker, retrying retriable errors with backoff (Kafka's
        Sender.maybeWaitForProducerId); batches wait in their queues meanwhile."""
        cluster = self._cluster
        assert cluster is not None and self._idempotence is not None
        attempt = 0
        try:
            while not self._closed:
                attempt += 1
                try:
                    response: InitProducerIdResponse = await cluster.send_any(
                        InitProducerIdRequest(), timeout_ms=self._request_timeout_ms
                    )
                    error = None
                    if response.error_code:
                        error = KafkaError(
                            ErrorCode.from_wire(response.error_code),
                            response.error_message or "InitProducerId failed",
                        )
                except KafkaError as exc:
                    cluster.request_update()
                    error = exc
                if error is None:
                    self._idempotence.set_producer_id(response.producer_id, response.producer_epoch)
                    log.info(
                        "producer id assigned",
                        producer_id=response.producer_id,
                        epoch=response.producer_epoch,
                    )
                    return
                if not error.retriable:
                    self._fatal_error = KafkaError(
                        error.code,
                        f"the idempotent producer could not get a producer id: {error.message}"
                        " (enable.idempotence=false sends without one)",
                    )
                    log.warning("no producer id", error=str(error))
                    return
                log.info("retrying InitProducerId", attempt=attempt, error=str(error))
                await trio.sleep(
                    backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms)
                    / 1000
                )
        finally:
            self._producer_id_pending = False
            self._wake()

    async def _refresh_metadata(self) -> None:
        assert self._cluster is not None
        await self._cluster.maybe_refresh()
        self._wake()

    async def _connect(self, node: int) -> None:
        assert self._cluster is not None
        try:
            await self._cluster.connection(node)
        except KafkaConnectionError as exc:
            log.info("cannot connect to broker", node=node, error=exc.message)
            self._cluster.request_update()
        except SaslAuthenticationError as exc:
            # Fatal, as Kafka's AuthenticationException: retrying the same login cannot help.
            log.error("authentication failed", node=node, error=exc.message)
            self._fatal_error = exc
            for batch in self._accumulator.abort_all():
                self._fail(batch, exc)
        finally:
            self._connecting.discard(node)
        self._wake()

    async def _send_batches(self, node: int, batches: list[ProducerBatch]) -> None:
        cluster = self._cluster
        assert cluster is not None
        try:
            topics: dict[str, list[ProducePartition]] = {}
            by_tp: dict[TopicPartition, list[ProducerBatch]] = {}
            for batch in batches:
                by_tp.setdefault(batch.tp, []).append(batch)
            for tp, group in by_tp.items():
                data = b"".join(b.close() for b in group) if len(group) > 1 else group[0].close()
                topics.setdefault(tp.topic, []).append(
                    ProducePartition(index=tp.partition, records=data)
                )
            request = ProduceRequest(
                acks=self._acks,
                timeout_ms=int(self._request_timeout_ms),
                topics=tuple(
                    ProduceTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()
                ),
            )
            try:
                conn = await cluster.connection(node)
            except KafkaError as exc:
                # No connection: nothing was sent, every batch may be retried.
                cluster.request_update()
                for batch in batches:
                    self._retry_or_fail(batch, exc)
                return
            try:
                if self._acks == 0:
                    await conn.send_only(request)
                    for batch in batches:
                        self._accumulator.complete(batch, -1, None)
                    return
                response = await conn.request(request)
                if self._failpoint(LOSE_PRODUCE_RESPONSE):
                    log.warning("failpoint: the Produce response is dropped", node=node)
                    raise KafkaTimeoutError(
                        f"ProduceRequest to broker {conn.address} got no response within "
                        f"{self._request_timeout_ms:.0f} ms (request.timeout.ms); connection "
                        f"closed (failpoint {LOSE_PRODUCE_RESPONSE})"
                    )
            except KafkaError as exc:
                # The connection broke or the request timed out once it was out: the leader
                # may have written the batches (outcome unknown); each may be retried.
                cluster.drop(node)
                cluster.request_update()
                for batch in batches:
                    batch.outcome_unknown = True
                    self._retry_or_fail(batch, exc)
                return
            if response.error_code:
                error = KafkaError(
                    ErrorCode.from_wire(response.error_code),
                    response.error_message or "Produce request failed",
                )
                for batch in batches:
                    self._retry_or_fail(batch, error)
                return
            results = {(t.name, p.index): p for t in response.topics for p in t.partitions}
            for tp, group in by_tp.items():
                part = results.get((tp.topic, tp.partition))
                if part is None:
                    error = KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for partition {tp}"
                    )
                    for batch in group:
                        self._retry_or_fail(batch, error)
                    continue
                code = ErrorCode.from_wire(part.error_code)
                # A duplicate is a success (older brokers answered it so, without offsets).
                if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    offset = part.base_offset
                    for batch in group:
                        self._succeed(batch, offset)
                        if offset >= 0:
                            offset += batch.record_count
                    continue
                if code in _SEQUENCE_ERRORS and self._idempotence is not None:
                    for batch in group:
                        self._sequence_error(batch, code, part.error_message)
                    continue
                moved = False
                if code in _LEADERSHIP_ERRORS:
                    moved = cluster.take_leader_hint(
                        tp.topic, tp.partition, part.current_leader, response.node_endpoints
                    )
                    if not moved:
                        cluster.metadata.invalidate_leader(tp.topic, tp.partition)
                        cluster.request_update()
                error = KafkaError(code, part.error_message or f"producing to {tp} failed")
                for batch in group:
                    if code in _MAYBE_WRITTEN:
                        batch.outcome_unknown = True
                    # To a leader the answer named: at once (KIP-951), no backoff.
                    self._retry_or_fail(batch, error, backoff=not moved)
        finally:
            self._memory_freed.set()
            self._memory_freed = trio.Event()
            self._wake()

    def _succeed(self, batch: ProducerBatch, base_offset: int) -> None:
        if self._idempotence is not None:
            self._idempotence.acknowledged(batch)
        self._accumulator.complete(batch, base_offset, None)

    def _sequence_error(self, batch: ProducerBatch, code: ErrorCode, message: str | None) -> None:
        """Kafka's idempotent producer without transactions: an out-of-order answer for a batch
        behind an earlier batch of its partition that is still unresolved (in flight or
        waiting for its retry) may be that one's doing, so retry; otherwise the leader's state
        and ours disagree: it refused the batch (not written), which fails, and a batch under
        the current id makes the producer take a new id."""
        idem = self._idempotence
        assert idem is not None
        detail = message or code.name
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and idem.has_unresolved_before(batch):
            self._retry_or_fail(batch, KafkaError(code, detail), retriable=True)
            return
        error: KafkaError
        then = (
            "the producer takes a new producer id"
            if idem.is_current(batch)
            else "the producer had already taken a new producer id"
        )
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            error = OutOfOrderSequenceError(
                f"{batch.tp}: the leader found a gap before sequence {batch.base_sequence} of "
                f"producer {batch.producer_id} and did not write the batch: {detail}; {then}"
            )
        else:
            error = KafkaError(
                code,
                f"{batch.tp}: the leader refused producer {batch.producer_id} epoch "
                f"{batch.producer_epoch}: {detail}; {then}",
            )
        self._fail(batch, error)

    def _retry_or_fail(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        *,
        retriable: bool | None = None,
        backoff: bool = True,
    ) -> None:
        now = now_ms()
        retriable = error.retriable if retriable is None else retriable
        # A batch sent under a producer id dropped since is retried as it was (never
        # re-stamped: it may be in the log already, and the leader answers its retry with its
        # original offsets), as Kafka retries an in-flight batch of a stale epoch; its
        # partition's new batches wait for it (client.idempotence).
        if (
            retriable
            and batch.attempts <= self._retries
            and now - batch.created_ms < self._delivery_timeout_ms
            and not self._accumulator.closing
        ):
            assert self._cluster is not None
            delay = (
                backoff_ms(
                    batch.attempts,
                    self._cluster.retry_backoff_ms,
                    self._cluster.retry_backoff_max_ms,
                )
                if backoff
                else 0.0
            )
            log.info(
                "retrying batch",
                tp=str(batch.tp),
                attempt=batch.attempts,
                producer_id=batch.producer_id,
                error=str(error),
            )
            self._accumulator.reenqueue(batch, now + delay)
            return
        if retriable and now - batch.created_ms >= self._delivery_timeout_ms:
            self._fail(batch, self._expiry_error(batch, now, error))
        else:
            self._fail(batch, error)

    def _expiry_error(
        self, batch: ProducerBatch, now: float, cause: KafkaError | None = None
    ) -> KafkaTimeoutError:
        """Kafka's TimeoutException for a batch past delivery.timeout.ms (Sender's text), and
        what is known of it: sent and maybe written (outcome unknown), or never sent."""
        text = (
            f"Expiring {batch.record_count} record(s) for {batch.tp}:"
            f"{now - batch.created_ms:.0f} ms has passed since batch creation "
            f"(delivery.timeout.ms={self._delivery_timeout_ms:.0f})"
        )
        if batch.outcome_unknown:
            text += "; outcome unknown: an attempt got no answer, the records may have been written"
        elif batch.attempts == 0:
            assert self._cluster is not None
            metadata = self._cluster.metadata
            text += "; never sent"
            if metadata.leader_for(batch.tp.topic, batch.tp.partition) is None:
                reason = metadata.no_leader_reason(batch.tp.topic, batch.tp.partition)
                text += f": {batch.tp} has no leader ({reason})"
        if cause is not None:
            text += f"; last error: {cause}"
        return KafkaTimeoutError(text)

    def _failpoint(self, name: str) -> bool:
        return self._failpoints is not None and self._failpoints.eval(name) is not None

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        idem = self._idempotence
        if idem is not None and batch.base_sequence != NO_SEQUENCE:
            current = idem.is_current(batch)
            idem.failed(batch)
            if current:
                # A sequenced batch that failed leaves a gap or an unknown in the partition's
                # sequences; later batches would be refused, so start over with a new producer
                # id (simpler than Kafka's epoch bump per partition). Batches in flight under
                # the old id go on as they are (client.idempotence).
                idem.reset_producer_id()
                log.warning(
                    "resetting the producer id",
                    tp=str(batch.tp),
                    producer_id=batch.producer_id,
                    error=str(error),
                    still_in_flight_under_it=[str(tp) for tp in idem.stale_partitions()],
                )
        self._accumulator.complete(batch, -1, error)
        self._memory_freed.set()
        self._memory_freed = trio.Event()
