"""Chaos history ops on the telemetry's clock, and failovers from ops shaped as
analytics.schemas.parse_history makes them (monotonic time_ns, shipped_ts, detail JSON), or
from the chaos runner's own "nemesis" log events."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from analytics.transforms.failovers import failovers
from analytics.transforms.history import with_wall_clock
from tests.support.telemetry_frames import event, events_df, samples_df

# The columns of parse_history that matter here (it has more).
PARSED_OPS = StructType(
    [
        StructField("shipped_ts", TimestampType()),
        StructField("time_ns", LongType()),
        StructField("process", StringType()),
        StructField("type", StringType()),
        StructField("kind", StringType()),
        StructField("topic", StringType()),
        StructField("partition", LongType()),
        StructField("fault", StringType()),
        StructField("targets", ArrayType(StringType())),
        StructField("detail", StringType()),
    ]
)
T0 = 1_790_000_000_000  # epoch ms
MONO0_NS = 5_000_000_000_000  # ~83 min of uptime, in ns


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def test_epoch_time_ns_is_used_as_is(spark: SparkSession) -> None:
    ops = spark.createDataFrame(
        [(None, T0 * 1_000_000 + 999_999, "p", "ok", "send", "t", 0, None, None, None)], PARSED_OPS
    )
    (row,) = with_wall_clock(ops).collect()
    assert (row.ts_ms, row.ts_from) == (T0, "epoch")


def test_monotonic_times_are_aligned_by_the_quickest_shipping(spark: SparkSession) -> None:
    # op k happened at monotonic MONO0 + k s (wall T0 + k s); ops 0 and 1 were shipped 2 s and
    # 0.5 s after they happened: the offset is read from op 1, times come out 0.5 s late
    rows = [
        (_at(T0 + 2_000), MONO0_NS, "p", "ok", "send", "t", 0, None, None, None),
        (_at(T0 + 1_500), MONO0_NS + 1_000_000_000, "p", "ok", "send", "t", 0, None, None, None),
    ]
    out = with_wall_clock(spark.createDataFrame(rows, PARSED_OPS)).orderBy("time_ns").collect()
    assert [(r.ts_ms, r.ts_from) for r in out] == [(T0 + 500, "shipped"), (T0 + 1_500, "shipped")]


def test_recorded_ts_ms_wins_and_older_ops_fall_back(spark: SparkSession) -> None:
    # the chaos runner records ts_ms with every op; an older history has it null
    schema = StructType([*PARSED_OPS.fields, StructField("ts_ms", LongType())])
    rows = [
        (_at(T0 + 2_000), MONO0_NS, "p", "ok", "send", "t", 0, None, None, None, T0 + 7),
        (_at(T0 + 1_500), MONO0_NS + 1_000_000_000, "p", "ok", "send", "t", 0, None, None, None,
         None),
    ]  # fmt: skip
    out = with_wall_clock(spark.createDataFrame(rows, schema)).orderBy("time_ns").collect()
    assert [(r.ts_ms, r.ts_from) for r in out] == [(T0 + 7, "ts_ms"), (T0 + 1_500, "shipped")]


def test_failover_from_parsed_history_ops(spark: SparkSession) -> None:
    def op(offset_ms: int, *rest: object) -> tuple:
        # shipped together, 100 ms after the last op (at +9 s)
        return (_at(T0 + 9_100), MONO0_NS + offset_ms * 1_000_000, *rest)

    ops = spark.createDataFrame(
        [
            op(0, "producer-0", "ok", "send", "t", 0, None, None, None),
            op(
                1_000,
                "nemesis",
                "info",
                "nemesis",
                None,
                None,
                "kill",
                ["broker-2"],
                '{"action": "kill", "signal": "SIGKILL"}',
            ),
            op(
                4_000,
                "nemesis",
                "info",
                "nemesis",
                None,
                None,
                "kill",
                ["broker-2"],
                '{"action": "restart", "pid": 7}',
            ),
            op(9_000, "producer-0", "ok", "send", "t", 0, None, None, None),
        ],
        PARSED_OPS,
    )
    events = events_df(
        spark,
        [event(T0 + 3_000, "controller-3000", "broker failure detected", broker_id=2, reason="x")],
    )
    timeline, _, gaps = failovers(events, samples_df(spark, []), ops)
    (row,) = timeline.collect()
    # the kill at +1 s reads +1.1 s (shipping delay 100 ms); the restart is not a fault
    assert (row.fault_from, row.fault_ms, row.detect_ms) == ("nemesis", T0 + 1_100, 1_900.0)
    assert row.unavailability_ms == 9_000.0  # exact: both acks on the same clock
    assert [r.partition for r in gaps.collect()] == [0]


def test_fault_time_from_the_chaos_runners_log_events(spark: SparkSession) -> None:
    def nemesis(ts: int, action: str) -> dict:
        # the runner's fields are outside the catalogue: they live in `record` only
        return event(
            ts, "chaos", "nemesis", fault="kill", targets=["broker-2"], detail={"action": action}
        )

    def detected(ts: int) -> dict:
        return event(ts, "controller-3000", "broker failure detected", broker_id=2, reason="x")

    events = events_df(
        spark,
        [
            nemesis(T0 - 500, "kill"),
            detected(T0 + 2_000),
            nemesis(T0 + 30_000, "restart"),
            event(T0 + 31_000, "broker-2", "fetcher started"),
            nemesis(T0 + 40_000, "pause"),
            nemesis(T0 + 41_000, "resume"),  # healed before the detection: not its fault
            detected(T0 + 45_000),
        ],
    )
    empty_ops = spark.createDataFrame([], PARSED_OPS)
    timeline, _, _ = failovers(events, samples_df(spark, []), empty_ops)
    rows = [(r.fault_from, r.fault_ms, r.detect_ms) for r in timeline.collect()]
    assert rows == [("nemesis", T0 - 500, 2_500.0), ("last seen", T0 + 31_000, 14_000.0)]
