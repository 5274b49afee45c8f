"""The `trioka` data source's I/O: partition bounds through the Admin and Consumer, and the
records of one offset range through a SyncConsumer by assignment (no group, nothing committed).

Rows have Spark's Kafka source layout: (key, value, topic, partition, offset, timestamp,
timestampType), handed to Spark as Arrow record batches (one per poll); trioka keeps
CreateTime only, so timestampType is always 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import trio
from pyspark.sql.pandas.types import to_arrow_schema

from analytics.schemas import RAW_SCHEMA
from analytics.source_options import OffsetRange, PartitionBounds, SourceOptionError, SourceOptions
from client import Admin, Consumer, ConsumerRecord
from client.sync import SyncConsumer
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

CREATE_TIME = 0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_POLL_MS = 500
_MAX_POLL = 10_000


class SourceReadError(RuntimeError):
    """A read that cannot go on (data deleted under it, no progress within the timeout)."""


def fetch_bounds(options: SourceOptions) -> dict[TopicPartition, PartitionBounds]:
    """[log start, high watermark) of every partition of the topics read."""
    return trio.run(_fetch_bounds, options)


async def _fetch_bounds(options: SourceOptions) -> dict[TopicPartition, PartitionBounds]:
    config = options.consumer_config()
    admin_config = {k: config[k] for k in config if k in _ADMIN_KEYS}
    try:
        async with Admin(admin_config) as admin:
            try:
                described = await admin.describe_topics(list(options.topics))
            except KafkaError as exc:
                if exc.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise SourceOptionError(
                        f"option topic: {exc.message} (at {options.bootstrap_servers})"
                    ) from None
                raise
        tps = [TopicPartition(t.name, p.partition) for t in described for p in t.partitions]
        async with Consumer(config) as consumer:
            earliest = await consumer.beginning_offsets(tps)
            latest = await consumer.end_offsets(tps)
    except KafkaError as exc:
        raise SourceReadError(
            f"cannot read offsets of {', '.join(options.topics)} from "
            f"{options.bootstrap_servers}: {exc.message}"
        ) from None
    return {tp: PartitionBounds(earliest[tp], latest[tp]) for tp in sorted(tps)}


_ADMIN_KEYS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "request.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "metadata.max.age.ms",
        "max.in.flight.requests.per.connection",
        "default.api.timeout.ms",
    }
)


def to_timestamp(ms: int) -> datetime:
    """A record timestamp (epoch ms) as the aware UTC datetime Spark's TimestampType takes."""
    return _EPOCH + timedelta(milliseconds=ms)


ARROW_SCHEMA = to_arrow_schema(RAW_SCHEMA, timezone="UTC")
"""RAW_SCHEMA as Spark itself maps it to Arrow (timestamps: microseconds, UTC)."""


def read_arrow(options: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of `rng` as Arrow record batches (RAW_SCHEMA's layout), one per poll:
    Spark takes them without converting row by row (several times the rows' throughput)."""
    for records in read_chunks(options, rng):
        n = len(records)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([r.key for r in records], pa.binary()),
                pa.array([r.value for r in records], pa.binary()),
                pa.array([rng.topic] * n, pa.string()),
                pa.array([rng.partition] * n, pa.int32()),
                pa.array([r.offset for r in records], pa.int64()),
                pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
                    ARROW_SCHEMA.field("timestamp").type
                ),
                pa.array([CREATE_TIME] * n, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )


def read_chunks(options: SourceOptions, rng: OffsetRange) -> Iterator[list[ConsumerRecord]]:
    """The records of `rng` in offset order, a poll's worth at a time. Fails when the range's
    start was deleted (failOnDataLoss) or no record arrives for kafkaConsumer.pollTimeoutMs."""
    tp = rng.tp
    config = options.consumer_config()
    if not options.fail_on_data_loss:
        config["auto.offset.reset"] = "earliest"
    with SyncConsumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        position = rng.start
        stalled_since = time.monotonic()
        while position < rng.end:
            try:
                records = consumer.poll(_POLL_MS, max_records=min(rng.end - position, _MAX_POLL))
            except KafkaError as exc:
                raise SourceReadError(
                    f"reading {tp} offsets {rng.start}..{rng.end - 1}: {exc.message}"
                    + ("; set failOnDataLoss=false to skip deleted records"
                       if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE else "")
                ) from None  # fmt: skip
            wanted = [r for r in records if r.offset < rng.end]
            if wanted:
                yield wanted
            moved = consumer.position(tp)
            if moved > position:
                position, stalled_since = moved, time.monotonic()
            elif (time.monotonic() - stalled_since) * 1000 > options.poll_timeout_ms:
                raise SourceReadError(
                    f"reading {tp}: no record after offset {position} for "
                    f"{options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); wanted up to "
                    f"{rng.end - 1}"
                )


def existing_topics(bootstrap_servers: str, wanted: Iterable[str]) -> list[str]:
    """Those of `wanted` that exist (internal ones included), in the given order."""
    return trio.run(_existing_topics, bootstrap_servers, list(wanted))


async def _existing_topics(bootstrap_servers: str, wanted: list[str]) -> list[str]:
    try:
        async with Admin(bootstrap_servers=bootstrap_servers) as admin:
            present = set(await admin.list_topics(include_internal=True))
    except KafkaError as exc:
        raise SourceReadError(f"cannot list topics at {bootstrap_servers}: {exc.message}") from None
    return [t for t in wanted if t in present]


def log_offsets(bootstrap_servers: str) -> list[tuple[str, int, int, int]]:
    """(topic, partition, log start offset, log end offset) of every partition of every topic
    (internal ones included), asked of the cluster with ListOffsets earliest/latest: the
    report's exact per-topic record counts, whatever the brokers' metrics shipped before a
    SIGKILL. Asked by the driver before Spark starts."""
    return trio.run(_log_offsets, bootstrap_servers)


async def _log_offsets(bootstrap_servers: str) -> list[tuple[str, int, int, int]]:
    try:
        async with Admin(bootstrap_servers=bootstrap_servers) as admin:
            names = await admin.list_topics(include_internal=True)
            described = await admin.describe_topics(sorted(names)) if names else []
        tps = [TopicPartition(t.name, p.partition) for t in described for p in t.partitions]
        if not tps:
            return []
        async with Consumer(bootstrap_servers=bootstrap_servers) as consumer:
            earliest = await consumer.beginning_offsets(tps)
            latest = await consumer.end_offsets(tps)
    except KafkaError as exc:
        raise SourceReadError(
            f"cannot read log offsets at {bootstrap_servers}: {exc.message}"
        ) from None
    return [(tp.topic, tp.partition, earliest[tp], latest[tp]) for tp in sorted(tps)]
