"""Failover timelines: for each broker failure the controller detected, how long each phase of
leader switching took, and how long clients could not write (the report's "what slows leader
switching").

A failover starts with the controller's "broker failure detected" event (a second detection of
the same broker within `merge_ms` is the same failure). Its phases:

- fault: when the broker failed. The latest nemesis op against the broker (targets holding
  "broker-<id>") before the detection, within `lookback_ms`, if it is a fault (kill, pause,
  cut...; not a restart or resume): a chaos history op, or the chaos runner's own "nemesis"
  log event when it shipped its logs; without one,
  the broker's last sign of life (its last log event or metrics snapshot) before the detection:
  `fault_from` says which ("nemesis" or "last seen").
- detect_ms (detection): detection minus fault. The controller logs the detection when the
  event that found the failure runs, so it includes that event's queue wait.
- event_type, queue_ms, election_ms (controller queue wait, election): the `queue_ms` and
  `process_ms` of the controller event that detected the failure and elected the new leaders
  (from its submission to its run; from its run to its answer, its records written and
  committed in batches): the detecting controller's first "controller event processed" at or
  after the detection whose event_type is the detection's (its "broker failure detected"
  carries it: FenceDeadBroker, FenceStaleBrokers, BrokerHeartbeat, BrokerRegistration in Raft
  mode, FenceDeadBroker or BrokerChange in ZK mode). Not the first event after the last
  election: a large fencing's elections are logged only once its last batch commits, and the
  victim's re-registration or later controlled shutdown come after. Older telemetry without
  the detection's event_type: the first "controller event processed" at or after the
  failover's last "leader election" (at or after the detection when nothing was elected).
- elections: the failover's "leader election" events: the detecting controller's, of a
  partition the failed broker led (previous_leader), within a minute of the detection, logged
  by the detecting kind of event (their event_type; any when unknown): the re-elections of the
  restarted victim's controlled shutdown or of a preferred-leader election are not the
  failover's.
- propagation_ms (commit/propagation) and apply_ms (broker apply), per elected partition: its
  "leader election" (logged by the controller once the change committed) -> received: the new
  leader received the change set holding it (its "applied metadata changes" in Raft mode,
  "applied LeaderAndIsr" in ZK mode: the first of the new leader's at or after the partition's
  applied time, minus that event's apply_ms) -> applied: "partition leadership applied" (as
  leader, same leader epoch) on the new leader, the first at or after the detection (within
  a minute of the election: the runs of a report reuse topic names, broker ids and epochs).
  propagation_ms is received minus elected (the
  commit, the ZK controller's LeaderAndIsr, a Raft broker's observer fetching the records),
  apply_ms applied minus received (the broker's own replay and apply, a later step of a large
  delta waiting behind the earlier ones). Without the change-set event (older telemetry)
  propagation_ms is applied minus elected and apply_ms null. The failover's two are those of
  its slowest partition (the largest applied minus elected), so they add up. A large result
  goes out in batches that commit (and reach the brokers) one by one while the controller logs
  every election at the end: an early batch's partitions may show a negative propagation; the
  slowest partition is in the last batch.
- partitions (the size): the cluster's partitions at the detection: the detecting controller's
  latest KafkaController GlobalPartitionCount (non-zero, i.e. while it was active) at or
  before the detection, else the sum over brokers of each one's latest ReplicaManager
  LeaderCount at or before it (partitions without a leader are missed); `size_from` says which
  ("controller" or "brokers").
- unavailability_ms (the client-observed gap): per partition being written at the fault in
  the chaos history (a chaos run's clients, or a benchmark's sampler: bench/telemetry_export.py),
  the gap between its last acknowledged send before the fault and its first after it; the
  failover's is the worst partition's. Being written means a last acknowledgement within
  WRITING_WITHIN_MS (5 s; the sampler writes each partition every 100 ms) before the fault: a
  partition last acknowledged earlier was another step's or another run's (the runs of one
  report reuse topic names), and its gap would span steps or runs; it has none. (The failover
  benchmark's "per-partition unavailability" is the same ack-to-ack gap, except that it skips
  acknowledgements in the first 100 ms after the kill, answers to sends made before it.)

The ops columns used (analytics.schemas.parse_history's): kind, type, topic, partition, targets
(array of node names), the nemesis action (an `action` column, or inside the `detail` JSON
text) and the op's time: `ts_ms`, or `time_ns` (+ `shipped_ts`) put on the telemetry's clock by
analytics.transforms.history. analytics.schemas.FAILOVER_OPS_SCHEMA is that minimum, for an
empty history.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics.transforms.history import with_wall_clock
from protocol.metric_names import GLOBAL_PARTITION_COUNT, LEADER_COUNT

# Nemesis actions that take a broker away (restart, resume, heal... bring it back).
FAULT_ACTIONS = ("kill", "pause", "kill-leader", "pause-followers", "cut")
LOOKBACK_MS = 120_000
WRITING_WITHIN_MS = 5_000
"""A partition counts toward a failover's client-observed gap only if it was acknowledged
within this long before the fault. The benchmark's sampler writes each of its partitions every
100 ms (bench/failover_sampler.py) and a chaos run's clients keep writing, so a partition being
written at the fault has an acknowledgement a few hundred ms before it; an older last one is
another step's or another run's sampler (the runs of a report reuse topic names), and a gap
from it would span steps or runs (minutes). 5 s leaves room for a slow acks=all round trip
under load."""
MERGE_MS = 10_000
ELECTION_SLACK_MS = 1_000
ELECTION_HORIZON_MS = 60_000
# The brokers' one event per applied change set (protocol.telemetry), both metadata modes.
CHANGE_SET_EVENTS = ("applied metadata changes", "applied LeaderAndIsr")
CHANGE_SET_HORIZON_MS = 60_000
GLOBAL_PARTITIONS = GLOBAL_PARTITION_COUNT


def detections(events: DataFrame, *, merge_ms: int = MERGE_MS) -> DataFrame:
    """failover_id (1, 2, ... in time order), broker_id, controller, reason, detected_ms,
    detected_by (the event_type of the controller event that found the failure; null in
    older telemetry)."""
    detected = events.where(F.col("event") == "broker failure detected").select(
        "broker_id",
        F.col("source").alias("controller"),
        "reason",
        F.col("ts_ms").alias("detected_ms"),
        F.col("event_type").alias("detected_by"),
        # Logged with the detection; in older telemetry a dedicated controller process is
        # Raft mode's and one inside a broker carries its broker's metadata_mode.
        F.coalesce(
            F.col("metadata_mode"), F.when(F.col("role") == "controller", F.lit("raft"))
        ).alias("mode"),
    )
    per_broker = Window.partitionBy("broker_id").orderBy("detected_ms")
    previous = F.lag("detected_ms").over(per_broker)
    fresh = detected.withColumn("_prev", previous).where(
        F.col("_prev").isNull() | (F.col("detected_ms") - F.col("_prev") > merge_ms)
    )
    order = Window.orderBy("detected_ms", "broker_id")
    return fresh.drop("_prev").withColumn("failover_id", F.row_number().over(order))


def _ops_view(ops: DataFrame) -> DataFrame:
    """ops with the columns used here, on the telemetry's clock, whatever optional columns
    parse_history added."""
    ops = with_wall_clock(ops)
    cols = set(ops.columns)
    if "action" in cols:
        action: Column = F.col("action")
    elif "detail" in cols:
        action = F.get_json_object(F.col("detail").cast("string"), "$.action")
    else:
        action = F.lit(None).cast("string")
    targets = F.col("targets") if "targets" in cols else F.array().cast("array<string>")
    return ops.select(
        "ts_ms",
        "type",
        "kind",
        "topic",
        F.col("partition").cast("int").alias("partition"),
        targets.alias("targets"),
        action.alias("action"),
    )


def _nemesis_logged(events: DataFrame) -> DataFrame:
    """The chaos runner's own "nemesis" log events, when it shipped its logs: op_ms, action,
    target. They carry epoch times, so they need no clock alignment."""
    logged = events.where(F.col("event") == "nemesis").select(
        F.col("ts_ms").alias("op_ms"),
        F.get_json_object("record", "$.detail.action").alias("action"),
        F.from_json(F.get_json_object("record", "$.targets"), "array<string>").alias("targets"),
    )
    return logged.select("op_ms", "action", F.explode("targets").alias("target"))


def _is_fault(action: Column) -> Column:
    """A nemesis op that takes a broker away (unknown actions count as faults)."""
    return action.isNull() | action.isin(*FAULT_ACTIONS)


def fault_times(
    found: DataFrame,
    events: DataFrame,
    samples: DataFrame,
    ops: DataFrame,
    *,
    lookback_ms: int = LOOKBACK_MS,
) -> DataFrame:
    """detections + fault_ms, fault_from ("nemesis", "last seen" or null) and detect_ms."""
    from_history = (
        _ops_view(ops)
        .where(F.col("kind") == "nemesis")
        .select(F.col("ts_ms").alias("op_ms"), "action", F.explode("targets").alias("target"))
    )
    nemesis = from_history.unionByName(_nemesis_logged(events))
    d = found.alias("d")
    hit = (F.col("target") == F.concat(F.lit("broker-"), F.col("d.broker_id").cast("string"))) & (
        F.col("op_ms").between(F.col("d.detected_ms") - lookback_ms, F.col("d.detected_ms"))
    )
    # The latest op against the broker decides: a heal after a fault (restart, resume) means
    # that fault is not what the controller detected.
    latest = F.max_by(F.struct("op_ms", _is_fault(F.col("action")).alias("fault")), "op_ms")
    by_nemesis = (
        d.join(nemesis, hit)
        .groupBy("failover_id")
        .agg(latest.alias("_latest"))
        .select(
            "failover_id",
            F.when(F.col("_latest.fault"), F.col("_latest.op_ms")).alias("nemesis_ms"),
        )
    )
    seen = events.select("node_id", F.col("ts_ms").alias("seen_ms")).unionByName(
        samples.select("node_id", F.col("ts_ms").alias("seen_ms")).distinct()
    )
    alive = (F.col("node_id") == F.col("d.broker_id")) & (F.col("seen_ms") < F.col("d.detected_ms"))
    by_seen = d.join(seen, alive).groupBy("failover_id").agg(F.max("seen_ms").alias("seen_ms"))
    out = found.join(by_nemesis, "failover_id", "left").join(by_seen, "failover_id", "left")
    fault_from = F.when(F.col("nemesis_ms").isNotNull(), "nemesis").when(
        F.col("seen_ms").isNotNull(), "last seen"
    )
    return (
        out.withColumn("fault_ms", F.coalesce("nemesis_ms", "seen_ms"))
        .withColumn("fault_from", fault_from)
        .withColumn("detect_ms", (F.col("detected_ms") - F.col("fault_ms")).cast("double"))
        .drop("nemesis_ms", "seen_ms")
    )


def failover_elections(
    found: DataFrame,
    events: DataFrame,
    *,
    slack_ms: int = ELECTION_SLACK_MS,
    horizon_ms: int = ELECTION_HORIZON_MS,
) -> DataFrame:
    """The elections of each failover, with their propagation: failover_id, topic, partition,
    leader, leader_epoch, cause, elected_ms, received_ms, applied_ms, propagation_ms, apply_ms.
    An election belongs to a failover when the failed broker led the partition and it came from
    the detecting controller within [detection - slack_ms, detection + horizon_ms), by the same
    kind of controller event as the detection (the elections' event_type; either null, older
    telemetry: any): the victim's later controlled shutdown or re-registration re-elects its
    partitions too."""
    elections = events.where(F.col("event") == "leader election").select(
        F.col("source").alias("e_controller"),
        "topic",
        "partition",
        "leader",
        "previous_leader",
        "leader_epoch",
        "cause",
        F.col("event_type").alias("e_event_type"),
        F.col("ts_ms").alias("elected_ms"),
    )
    d = found.select("failover_id", "broker_id", "controller", "detected_ms", "detected_by")
    d = d.alias("d")
    belongs = (
        (F.col("previous_leader") == F.col("d.broker_id"))
        & (F.col("e_controller") == F.col("d.controller"))
        & (F.col("elected_ms") >= F.col("d.detected_ms") - slack_ms)
        & (F.col("elected_ms") < F.col("d.detected_ms") + horizon_ms)
        & _same_kind(F.col("e_event_type"), F.col("d.detected_by"))
    )
    elected = d.join(elections, belongs).select(
        "failover_id",
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "cause",
        "elected_ms",
        F.col("d.detected_ms").alias("_detected_ms"),
    )
    applied = events.where(
        (F.col("event") == "partition leadership applied")
        & (F.col("role_in_partition").isNull() | (F.col("role_in_partition") == "leader"))
    ).select(
        F.col("node_id").alias("a_node"),
        F.col("topic").alias("a_topic"),
        F.col("partition").alias("a_partition"),
        F.col("leader_epoch").alias("a_epoch"),
        F.col("ts_ms").alias("a_ms"),
    )
    # Its application comes after the event that elected it ran (it may precede the election's
    # log line: a large result's early batches reach the brokers before the elections are
    # logged) and within the horizon: the runs of one report reuse topic names, broker ids and
    # leader epochs, so another run's application of the same epoch would match too.
    same = (
        (F.col("a_node") == F.col("leader"))
        & (F.col("a_topic") == F.col("topic"))
        & (F.col("a_partition") == F.col("partition"))
        & (F.col("a_epoch") == F.col("leader_epoch"))
        & (F.col("a_ms") >= F.col("_detected_ms"))
        & (F.col("a_ms") < F.col("elected_ms") + horizon_ms)
    )
    keys = ["failover_id", "topic", "partition", "leader", "leader_epoch", "cause", "elected_ms"]
    first_applied = (
        elected.join(applied, same, "left")
        .groupBy(*keys, "_detected_ms")
        .agg(F.min("a_ms").alias("applied_ms"))
        .drop("_detected_ms")
    )
    received = F.coalesce("received_ms", "applied_ms")
    return (
        with_received(first_applied, events)
        .withColumn("propagation_ms", (received - F.col("elected_ms")).cast("double"))
        .withColumn("apply_ms", (F.col("applied_ms") - F.col("received_ms")).cast("double"))
    )


def with_received(applied: DataFrame, events: DataFrame) -> DataFrame:
    """`applied` (leader, applied_ms, ...) plus received_ms: when the new leader received the
    change set it applied the partition in, from that set's event (the leader's first
    CHANGE_SET_EVENTS at or after applied_ms: it is logged once the whole set is applied), minus
    its apply_ms; null without one."""
    sets = events.where(
        F.col("event").isin(*CHANGE_SET_EVENTS) & F.col("apply_ms").isNotNull()
    ).select(
        F.col("node_id").alias("s_node"),
        F.col("ts_ms").alias("s_ms"),
        (F.col("ts_ms") - F.col("apply_ms")).alias("s_received"),
    )
    after = (
        (F.col("s_node") == F.col("leader"))
        & (F.col("s_ms") >= F.col("applied_ms"))
        & (F.col("s_ms") < F.col("applied_ms") + CHANGE_SET_HORIZON_MS)
    )
    first = F.min_by("s_received", "s_ms")
    # A wall-clock timestamp minus a monotonic duration: never later than the application.
    # (least skips nulls: without a set, received_ms stays null.)
    received = F.when(first.isNotNull(), F.least(F.round(first).cast("long"), F.col("applied_ms")))
    return (
        applied.join(sets, after, "left")
        .groupBy(*applied.columns)
        .agg(received.alias("received_ms"))
    )


def _same_kind(event_type: Column, detected_by: Column) -> Column:
    """The event is of the detecting event's type (true when either is unknown)."""
    return event_type.isNull() | detected_by.isNull() | (event_type == detected_by)


def processing(found: DataFrame, elected: DataFrame, events: DataFrame) -> DataFrame:
    """failover_id, event_type, queue_ms, election_ms: the controller event that detected the
    failure and elected (the module docstring's rule)."""
    last = elected.groupBy("failover_id").agg(F.max("elected_ms").alias("last_elected_ms"))
    # With the detecting event's type known, its own "processed" is the detecting controller's
    # first of that type at or after the detection (logged when it is answered, after its
    # elections). Without it (older telemetry): the first after the last election.
    after_ms = F.when(F.col("detected_by").isNotNull(), F.col("detected_ms")).otherwise(
        F.coalesce("last_elected_ms", "detected_ms")
    )
    d = (
        found.join(last, "failover_id", "left")
        .select("failover_id", "controller", "detected_by", after_ms.alias("after_ms"))
        .alias("d")
    )
    processed = events.where(F.col("event") == "controller event processed").select(
        F.col("source").alias("p_controller"),
        "event_type",
        "queue_ms",
        "process_ms",
        F.col("ts_ms").alias("p_ms"),
    )
    after = (
        (F.col("p_controller") == F.col("d.controller"))
        & (F.col("p_ms") >= F.col("d.after_ms"))
        & _same_kind(F.col("event_type"), F.col("d.detected_by"))
    )
    first = F.struct("p_ms", "event_type", "queue_ms", "process_ms")
    return (
        d.join(processed, after)
        .groupBy("failover_id")
        .agg(F.min(first).alias("_first"))
        .select(
            "failover_id",
            F.col("_first.event_type").alias("event_type"),
            F.col("_first.queue_ms").cast("double").alias("queue_ms"),
            F.col("_first.process_ms").cast("double").alias("election_ms"),
        )
    )


def unavailability(
    faults: DataFrame,
    elected: DataFrame,
    ops: DataFrame,
    *,
    writing_within_ms: int = WRITING_WITHIN_MS,
) -> DataFrame:
    """Per failover and partition acknowledged in the history within `writing_within_ms`
    before the fault (WRITING_WITHIN_MS): failover_id, topic, partition, elected (a leader was
    elected for it in this failover), last_ack_before_ms, first_ack_after_ms (its first
    acknowledgement after the fault), unavailability_ms (their difference)."""
    acks = (
        _ops_view(ops)
        .where((F.col("kind") == "send") & (F.col("type") == "ok"))
        .select("topic", "partition", F.col("ts_ms").alias("ack_ms"))
    )
    f = faults.select("failover_id", F.coalesce("fault_ms", "detected_ms").alias("fault_at")).where(
        F.col("fault_at").isNotNull()
    )
    joined = f.crossJoin(acks)
    before = F.when(F.col("ack_ms") <= F.col("fault_at"), F.col("ack_ms"))
    after = F.when(F.col("ack_ms") > F.col("fault_at"), F.col("ack_ms"))
    gaps = joined.groupBy("failover_id", "topic", "partition").agg(
        F.max(before).alias("last_ack_before_ms"), F.min(after).alias("first_ack_after_ms")
    )
    f_at = f.select("failover_id", F.col("fault_at").alias("_fault_at"))
    # Several runs or faults in one report: a partition another step's or run's sampler wrote
    # (its last ack seconds or minutes before this fault) would otherwise get a gap from one
    # step or run to the next.
    gaps = gaps.join(f_at, "failover_id").where(
        F.col("last_ack_before_ms") >= F.col("_fault_at") - writing_within_ms
    )
    gaps = gaps.drop("_fault_at").withColumn(
        "unavailability_ms",
        (F.col("first_ack_after_ms") - F.col("last_ack_before_ms")).cast("double"),
    )
    marks = elected.select("failover_id", "topic", "partition", F.lit(True).alias("elected"))
    marks = marks.dropDuplicates(["failover_id", "topic", "partition"])
    return (
        gaps.join(marks, ["failover_id", "topic", "partition"], "left")
        .withColumn("elected", F.coalesce("elected", F.lit(False)))
        .select(
            "failover_id",
            "topic",
            "partition",
            "elected",
            "last_ack_before_ms",
            "first_ack_after_ms",
            "unavailability_ms",
        )
        .orderBy("failover_id", "topic", "partition")
    )


TIMELINE_COLUMNS = (
    "failover_id",
    "broker_id",
    "controller",
    "mode",
    "reason",
    "fault_from",
    "fault_ms",
    "detected_ms",
    "detect_ms",
    "event_type",
    "queue_ms",
    "election_ms",
    "elections",
    "propagation_ms",
    "apply_ms",
    "unavailability_ms",
    "partitions",
    "size_from",
)


def cluster_sizes(found: DataFrame, samples: DataFrame) -> DataFrame:
    """failover_id, partitions, size_from: the cluster's partitions at each detection (the
    module docstring's rule)."""
    d = found.select("failover_id", "controller", "detected_ms").alias("d")
    before = F.col("ts_ms") <= F.col("d.detected_ms")
    by_controller = (
        d.join(
            samples.where((F.col("name") == GLOBAL_PARTITIONS) & (F.col("value") > 0)),
            (F.col("source") == F.col("d.controller")) & before,
        )
        .groupBy("failover_id")
        .agg(F.max_by("value", "ts_ms").alias("_controller"))
    )
    latest_per_broker = (
        d.join(samples.where(F.col("name") == LEADER_COUNT), before)
        .groupBy("failover_id", "source")
        .agg(F.max_by("value", "ts_ms").alias("_leaders"))
    )
    by_brokers = latest_per_broker.groupBy("failover_id").agg(F.sum("_leaders").alias("_brokers"))
    size_from = F.when(F.col("_controller").isNotNull(), "controller").when(
        F.col("_brokers").isNotNull(), "brokers"
    )
    return (
        found.select("failover_id")
        .join(by_controller, "failover_id", "left")
        .join(by_brokers, "failover_id", "left")
        .select(
            "failover_id",
            F.coalesce("_controller", "_brokers").cast("long").alias("partitions"),
            size_from.alias("size_from"),
        )
    )


def _slowest_partition(elected: DataFrame) -> DataFrame:
    """failover_id, elections, propagation_ms, apply_ms: the split of the partition whose
    leadership took longest from its election to its application."""
    total = F.col("applied_ms") - F.col("elected_ms")
    split = F.struct("propagation_ms", "apply_ms")
    slowest = F.max_by(F.when(total.isNotNull(), split), total)
    return (
        elected.groupBy("failover_id")
        .agg(F.count(F.lit(1)).alias("elections"), slowest.alias("_slowest"))
        .select(
            "failover_id",
            "elections",
            F.col("_slowest.propagation_ms").alias("propagation_ms"),
            F.col("_slowest.apply_ms").alias("apply_ms"),
        )
    )


def failover_timeline(
    faults: DataFrame,
    elected: DataFrame,
    processed: DataFrame,
    gaps: DataFrame,
    sizes: DataFrame,
) -> DataFrame:
    """One row per failover: TIMELINE_COLUMNS (times as epoch ms, phases in ms)."""
    worst = gaps.groupBy("failover_id").agg(F.max("unavailability_ms").alias("unavailability_ms"))
    out = (
        faults.join(processed, "failover_id", "left")
        .join(_slowest_partition(elected), "failover_id", "left")
        .join(worst, "failover_id", "left")
        .join(sizes, "failover_id", "left")
        .withColumn("elections", F.coalesce("elections", F.lit(0)).cast("long"))
    )
    return out.select(*TIMELINE_COLUMNS).orderBy("failover_id")


def failovers(
    events: DataFrame, samples: DataFrame, ops: DataFrame
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(timeline, elections per failover, unavailability per failover and partition)."""
    found = detections(events)
    faults = fault_times(found, events, samples, ops)
    elected = failover_elections(found, events)
    processed = processing(found, elected, events)
    gaps = unavailability(faults, elected, ops)
    sizes = cluster_sizes(found, samples)
    return failover_timeline(faults, elected, processed, gaps, sizes), elected, gaps


PHASES = ("detect_ms", "queue_ms", "election_ms", "propagation_ms", "apply_ms")


def _median(column: str) -> Column:
    """The exact median (the mean of the middle two of an even count); null without values."""
    return F.percentile(F.col(column), F.lit(0.5)).alias(column)


def per_size(timeline: DataFrame) -> DataFrame:
    """The failovers by metadata mode and cluster size (those with a known size), by mode then
    smallest first: mode (null when unknown), partitions, failovers, the median of each phase
    (PHASES' names), median and max unavailability_ms."""
    return (
        timeline.where(F.col("partitions").isNotNull())
        .groupBy("mode", "partitions")
        .agg(
            F.count(F.lit(1)).alias("failovers"),
            *[_median(column) for column in PHASES],
            F.percentile(F.col("unavailability_ms"), F.lit(0.5)).alias("median_unavailability_ms"),
            F.max("unavailability_ms").alias("max_unavailability_ms"),
        )
        .orderBy(F.col("mode").asc_nulls_last(), "partitions")
    )


def phase_breakdown(timeline: DataFrame) -> DataFrame:
    """What slows leader switching, over all failovers: per phase (detect, queue, election,
    propagation, apply) the failovers that measured it, mean_ms, max_ms and share (of the sum
    of the phases' means), slowest first."""
    per_phase = [
        timeline.select(F.lit(column.removesuffix("_ms")).alias("phase"), F.col(column).alias("ms"))
        for column in PHASES
    ]
    rows = per_phase[0]
    for frame in per_phase[1:]:
        rows = rows.unionByName(frame)
    stats = rows.groupBy("phase").agg(
        F.count("ms").alias("failovers"),
        F.avg("ms").alias("mean_ms"),
        F.max("ms").alias("max_ms"),
    )
    total = F.sum("mean_ms").over(Window.partitionBy())
    return (
        stats.where(F.col("failovers") > 0)
        .withColumn("share", F.col("mean_ms") / total)
        .orderBy(F.desc("mean_ms"), "phase")
    )
