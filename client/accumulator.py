"""The producer's record accumulator (Kafka's RecordAccumulator), without I/O.

Records are appended to the last open batch of their partition; a batch is ready to send when
it is full, when linger.ms has passed since it was opened, or when a flush or close wants
everything out. `drain()` takes every ready batch led by a broker, up to max.request.size, so
one Produce request carries them all, except that a retried idempotent batch goes alone for its
partition (the batches behind it follow in the next request): Kafka sends one batch per
partition per Produce, and only a retry sent alone can be answered with its original offsets
by a leader that has it (after a failover, other producers' writes may sit between it and the
log end). Time is passed in (ms) so tests drive it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from client.futures import BatchResult, RecordFuture
from client.idempotence import IdempotenceManager
from protocol.names import TopicPartition
from protocol.record_batch import (
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchBuilder,
    Compression,
)

RECORD_OVERHEAD = 16
"""Per-record bytes beyond key and value in the size estimate (msgpack framing)."""


def record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
) -> int:
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for name, data in headers:
        size += len(name) + len(data) + 4
    return size


class ProducerBatch:
    """Records for one partition, sent (and retried) together."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "closed",
        "count",
        "created_ms",
        "outcome_unknown",
        "payload",
        "producer_epoch",
        "producer_id",
        "result",
        "retry_at_ms",
        "seq",
        "size",
        "tp",
    )

    _next_seq = 0

    def __init__(self, tp: TopicPartition, compression: Compression, now_ms: float) -> None:
        self.tp = tp
        ProducerBatch._next_seq += 1
        self.seq = ProducerBatch._next_seq
        """Creation order: a retried batch goes back in front of every later batch."""
        self.builder = BatchBuilder(compression=compression)
        self.result = BatchResult(tp.topic, tp.partition)
        self.created_ms = now_ms
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.size = HEADER_SIZE
        self.closed = False
        self.count = 0
        self.payload: bytes | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        """Given once, at the first drain of an idempotent producer; kept by every retry."""
        self.outcome_unknown = False
        """An attempt ended without an answer saying whether the leader wrote the batch (no
        response within request.timeout.ms, a connection that broke once the request was
        out, the leader's REQUEST_TIMED_OUT): it may be in the log."""

    @property
    def record_count(self) -> int:
        return self.count if self.payload is not None else len(self.builder.rows)

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        size: int,
        batch_size: int,
    ) -> RecordFuture | None:
        """Append unless that would overflow batch.size (a first record always fits)."""
        if self.closed or (self.builder.rows and self.size + size > batch_size):
            return None
        # Inlined BatchBuilder.append: this is the per-record hot path.
        builder = self.builder
        rows = builder.rows
        delta = len(rows)
        if delta == 0:
            builder.base_timestamp = timestamp
        if timestamp > builder.max_timestamp:
            builder.max_timestamp = timestamp
        # A tuple, not a list: the garbage collector untracks tuples of atomic values, so a
        # full buffer.memory of queued records does not make every collection slower.
        rows.append((0, timestamp - builder.base_timestamp, delta, key, value, headers))
        self.size += size
        return RecordFuture(self.result, delta, timestamp)

    def close(self) -> bytes:
        """Seal the batch and encode it (once; retries resend the same bytes)."""
        self.closed = True
        if self.payload is None:
            self.count = len(self.builder.rows)
            self.builder.size_estimate = self.size
            self.payload = self.builder.build(
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
            self.builder.rows = []  # the encoded bytes are all a retry needs
        return self.payload


@dataclass(slots=True)
class ReadyCheck:
    ready_nodes: set[int]
    """Brokers with at least one sendable batch."""
    next_check_ms: float
    """How long until some batch may become ready (linger or backoff) or expires."""
    unknown_leaders: set[str]
    """Topics with batches whose partition has no known leader (refresh metadata)."""
    leaderless: set[TopicPartition] = field(default_factory=set)
    """The partitions of those batches."""


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int = 16384,
        linger_ms: float = 5,
        compression: Compression = Compression.NONE,
        delivery_timeout_ms: float = 120000,
        clock_ms: Callable[[], float] | None = None,
        idempotence: IdempotenceManager | None = None,
    ) -> None:
        self.clock_ms = clock_ms or (lambda: time.monotonic() * 1000)
        """Read only when a batch is opened, not per record."""
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.compression = compression
        self.delivery_timeout_ms = delivery_timeout_ms
        self.idempotence = idempotence
        """Set for an idempotent producer: drains follow its sequence and ordering rules."""
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.flushing = False
        self.closing = False
        self.buffered_bytes = 0
        """Bytes of records appended and not yet completed (buffer.memory accounting)."""
        self.incomplete: set[ProducerBatch] = set()
        """Batches created and not yet completed (in queues or in flight)."""

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        size: int,
        now_ms: float | None = None,
    ) -> tuple[RecordFuture, bool]:
        """Add a record; returns its future and whether the sender should wake up (a batch
        filled up or a new one was opened). `now_ms` defaults to the clock."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        if queue:
            future = queue[-1].try_append(timestamp, key, value, headers, size, self.batch_size)
            if future is not None:
                self.buffered_bytes += size
                return future, queue[-1].size >= self.batch_size
        batch = ProducerBatch(tp, self.compression, self.clock_ms() if now_ms is None else now_ms)
        future = batch.try_append(timestamp, key, value, headers, size, self.batch_size)
        assert future is not None  # a first record always fits
        queue.append(batch)
        self.incomplete.add(batch)
        self.buffered_bytes += size
        return future, True

    def queue_size(self, tp: TopicPartition) -> int:
        queue = self._queues.get(tp)
        return len(queue) if queue else 0

    def ready(self, leader_for: Callable[[str, int], int | None], now_ms: float) -> ReadyCheck:
        nodes: set[int] = set()
        unknown: set[str] = set()
        leaderless: set[TopicPartition] = set()
        next_check = float("inf")
        send_all = self.flushing or self.closing
        for tp, queue in self._queues.items():
            if not queue:
                continue
            first = queue[0]
            # Wake up for the first batch's delivery.timeout.ms too (Kafka's
            # nextBatchExpiryTimeMs): a batch waiting for a leader expires on time.
            next_check = min(next_check, first.created_ms + self.delivery_timeout_ms - now_ms)
            leader = leader_for(tp.topic, tp.partition)
            if leader is None:
                unknown.add(tp.topic)
                leaderless.add(tp)
                continue
            if leader in nodes:
                continue
            if first.retry_at_ms > now_ms:
                next_check = min(next_check, first.retry_at_ms - now_ms)
                continue
            if self.idempotence is not None and not self.idempotence.may_drain(first):
                continue  # the sender wakes when an earlier batch completes or the id arrives
            full = len(queue) > 1 or first.size >= self.batch_size
            waited = now_ms - first.created_ms
            if full or send_all or waited >= self.linger_ms:
                nodes.add(leader)
            else:
                next_check = min(next_check, self.linger_ms - waited)
        return ReadyCheck(nodes, next_check, unknown, leaderless)

    def drain(
        self,
        leader_for: Callable[[str, int], int | None],
        nodes: Iterable[int],
        max_request_size: int,
        now_ms: float,
    ) -> dict[int, list[ProducerBatch]]:
        """Take the sendable batches of each node: all ready batches of every partition it
        leads, up to max.request.size (at least one batch); an idempotent retry goes alone for
        its partition."""
        wanted = set(nodes)
        out: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        send_all = self.flushing or self.closing
        for tp, queue in self._queues.items():
            if not queue:
                continue
            leader = leader_for(tp.topic, tp.partition)
            if leader is None or leader not in wanted:
                continue
            taken = out.setdefault(leader, [])
            total = sizes.get(leader, 0)
            while queue:
                batch = queue[0]
                if batch.retry_at_ms > now_ms:
                    break
                last = len(queue) == 1
                if (
                    last
                    and batch.size < self.batch_size
                    and not send_all
                    and now_ms - batch.created_ms < self.linger_ms
                ):
                    break
                if taken and total + batch.size > max_request_size:
                    break
                sequenced_retry = batch.base_sequence != NO_SEQUENCE
                idem = self.idempotence
                if idem is not None:
                    if not idem.may_drain(batch):
                        break
                    idem.assign(batch)
                queue.popleft()
                batch.attempts += 1
                batch.closed = True
                taken.append(batch)
                total += batch.size
                if sequenced_retry:
                    # Alone for its partition, as every batch is in Kafka: the leader answers
                    # a retry it already has with the original base offset, which covers the
                    # batches after it only if they follow it in the log.
                    break
            sizes[leader] = total
        return {node: batches for node, batches in out.items() if batches}

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: float) -> None:
        """Put a failed batch back in its queue ahead of every batch created after it (so
        batches failing in any order are retried in their original order), after backoff."""
        batch.retry_at_ms = retry_at_ms
        queue = self._queues.setdefault(batch.tp, deque())
        index = 0
        while index < len(queue) and queue[index].seq < batch.seq:
            index += 1
        queue.insert(index, batch)

    def complete(self, batch: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.buffered_bytes -= batch.size - HEADER_SIZE
        batch.result.record_count = batch.record_count
        batch.result.complete(base_offset, error)

    def expired(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms."""
        out = []
        for queue in self._queues.values():
            while queue and now_ms - queue[0].created_ms >= self.delivery_timeout_ms:
                out.append(queue.popleft())
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (on a forced close)."""
        out = [b for q in self._queues.values() for b in q]
        self._queues.clear()
        return out

    def has_queued(self) -> bool:
        return any(self._queues.values())
