"""`spark.read.format("trioka")` and `spark.readStream.format("trioka")`: any trioka topic as a
DataFrame with Spark's Kafka source schema (analytics.schemas.RAW_SCHEMA).

    spark.dataSource.register(TriokaDataSource)   # or analytics.source.register(spark)
    df = (spark.read.format("trioka").option("bootstrap.servers", "127.0.0.1:9092")
          .option("topic", "__trioka_metrics").load())

Options (analytics.source_options): bootstrap.servers, topic, startingOffsets, endingOffsets,
maxOffsetsPerTrigger, failOnDataLoss, kafkaConsumer.pollTimeoutMs, kafka.<consumer config>.
One Spark input partition per topic-partition and offset range; the driver side plans with the
Admin and ListOffsets, the executors read with a SyncConsumer by assignment.

Streaming offsets are Spark's Kafka offset JSON ({"topic": {"0": 23}}: the next offset to read
per partition). Trigger.AvailableNow (SupportsTriggerAvailableNow) stops at the high watermarks
seen when the query starts, in micro-batches of maxOffsetsPerTrigger records when it is set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from analytics.raw_source import ItemReader, RawDataSource
from analytics.source_client import fetch_bounds, read_arrow
from analytics.source_options import (
    OffsetRange,
    Offsets,
    SourceOptions,
    parse_options,
    plan_ranges,
    rate_limit,
    resolve,
)

FORMAT = "trioka"


class TriokaDataSource(RawDataSource):
    format_name = FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        return TriokaBatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TriokaStreamReader(parse_options(self.options, streaming=True))


class _RangeReader(ItemReader[OffsetRange]):
    """One Spark task per offset range, read with a SyncConsumer by assignment."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def read_item(self, item: OffsetRange) -> Iterator[pa.RecordBatch]:
        return read_arrow(self.options, item)


class TriokaBatchReader(_RangeReader, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        bounds = fetch_bounds(o)
        start = resolve(o.starting, bounds, "startingOffsets")
        end = resolve(o.ending, bounds, "endingOffsets")
        ranges = plan_ranges(start, end, bounds, fail_on_data_loss=o.fail_on_data_loss)
        return self.item_partitions(ranges)


class TriokaStreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: Offsets | None = None
        """The high watermarks at the start of an availableNow query: never read past them."""

    def initialOffset(self) -> Offsets:
        return resolve(self.options.starting, fetch_bounds(self.options), "startingOffsets")

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        latest = self._target if self._target is not None else self._latest()
        # never go back (a partition whose log was truncated under us stays where it was)
        latest = {
            t: {p: max(o, start.get(t, {}).get(p, 0)) for p, o in parts.items()}
            for t, parts in latest.items()
        }
        if isinstance(limit, ReadMaxRows):
            return rate_limit(start, latest, limit.max_rows)
        return latest

    def _latest(self) -> Offsets:
        return resolve("latest", fetch_bounds(self.options), "endingOffsets")

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        ranges = plan_ranges(start, end, fail_on_data_loss=self.options.fail_on_data_loss)
        return self.item_partitions(ranges)


def register(spark: SparkSession) -> None:
    """Make `format("trioka")` available in `spark`."""
    spark.dataSource.register(TriokaDataSource)
