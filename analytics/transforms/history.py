"""Chaos history ops on the telemetry's clock (epoch ms).

The chaos recorder stamps ops with a monotonic clock (deploy/chaos/check/history.py: it orders the
ops of one run), while log events and metric snapshots carry epoch milliseconds. `ts_ms` for an
op is, in order of preference:

- its own `ts_ms` (the chaos runner records wall-clock ms with every op; null in older
  histories, whose ops fall to the rules below);
- `time_ns` itself when it is epoch nanoseconds (a recorder clocked with time.time_ns: values
  past 2001 in epoch ns, far above any machine's uptime in ns);
- `time_ns` shifted by the smallest (shipped time - op time) over the history, when the ops
  carry the time they were shipped (`shipped_ts`, parse_history's record timestamp): an op
  cannot be shipped before it happened, so that is the clock offset plus the quickest
  shipping delay, an upper bound: the later the history was shipped after its last op, the
  later the times read. `ts_from` says which rule applied ("ts_ms", "epoch", "shipped").

Durations between ops (client unavailability) come out exact in every case; times compared
with log events (a fault's detection) are as good as the alignment.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

EPOCH_NS_FLOOR = 10**18  # 2001-09-09T01:46:40Z in epoch ns


def with_wall_clock(ops: DataFrame) -> DataFrame:
    """ops plus `ts_ms` (epoch ms, null when it cannot be known) and `ts_from`."""
    cols = set(ops.columns)
    recorded = F.col("ts_ms").cast("long") if "ts_ms" in cols else F.lit(None).cast("long")
    if "time_ns" not in cols:
        return ops.withColumn(
            "ts_from", F.when(recorded.isNotNull(), "ts_ms").otherwise(F.lit(None).cast("string"))
        ).withColumn("ts_ms", recorded)
    op_ms = F.expr("time_ns div 1000000")  # integer division: doubles lose epoch ns digits
    epoch = F.when(F.col("time_ns") >= EPOCH_NS_FLOOR, op_ms)
    if "shipped_ts" in cols:
        delay = F.unix_millis(F.col("shipped_ts")) - op_ms
        offset = F.min(F.when(F.col("time_ns") < EPOCH_NS_FLOOR, delay)).over(Window.partitionBy())
        shipped = (op_ms + offset).cast("long")
    else:
        shipped = F.lit(None).cast("long")
    # Histories recorded before ops carried ts_ms have it null: the other rules fill those in.
    from_rule = (
        F.when(recorded.isNotNull(), "ts_ms")
        .when(epoch.isNotNull(), "epoch")
        .when(shipped.isNotNull(), "shipped")
    )
    # ts_from first: it reads the recorded ts_ms, which the second column replaces.
    return ops.withColumn("ts_from", from_rule).withColumn(
        "ts_ms", F.coalesce(recorded, epoch, shipped)
    )
