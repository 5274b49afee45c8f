"""Failover timelines on a hand-made story with known answers.

Failover 1: the nemesis kills broker-2 at t=2000 (chaos history); the controller detects it at
8000 (and again at 9000: the same failure); it elects t/0 (leader 1, epoch 5) at 8050 and t/1
(leader 3, epoch 7) at 8060; the event that elected them is logged at 8070 (queue 12.5 ms,
processing 40 ms); broker-1 applies t/0 at 8100, broker-3 applies t/1 at 8300. The producer's
last acks before the kill: t/0 at 1950, t/1 at 1990, t/2 (led by broker 1, not elected) at
1999; the first after: t/0 8200, t/1 8400, t/2 2010.

Failover 2: broker-1 detected at 20000 with no nemesis op against it: its last sign of life is
a log event at 16000 (a snapshot at 15000); nothing elected; the next processed event at 20005.

The brokers log no change-set events in this story (older telemetry): propagation is the whole
of election -> applied. `_change_sets` adds them: broker-1 received t/0's set at 8070 (applied at
8100, its "applied metadata changes" at 8100 with apply_ms 30), broker-3 t/1's at 8200 (applied
at 8300, its "applied LeaderAndIsr" at 8310 with apply_ms 110).
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from analytics.transforms.failovers import (
    GLOBAL_PARTITIONS,
    LEADER_COUNT,
    cluster_sizes,
    detections,
    failovers,
    per_size,
    phase_breakdown,
)
from tests.support.telemetry_frames import (
    event,
    events_df,
    nemesis,
    ops_df,
    sample,
    samples_df,
    send_ok,
)

CONTROLLER = "controller-3000"


def _events() -> list[dict[str, Any]]:
    def elected(ts: int, partition: int, leader: int, epoch: int) -> dict[str, Any]:
        return event(
            ts,
            CONTROLLER,
            "leader election",
            topic="t",
            partition=partition,
            leader=leader,
            previous_leader=2,
            leader_epoch=epoch,
            isr=[leader],
            cause="offline",
            unclean=False,
        )

    def applied(ts: int, broker: int, partition: int, epoch: int) -> dict[str, Any]:
        return event(
            ts,
            f"broker-{broker}",
            "partition leadership applied",
            topic="t",
            partition=partition,
            role_in_partition="leader",
            leader=broker,
            leader_epoch=epoch,
        )

    def processed(ts: int, queue_ms: float, process_ms: float) -> dict[str, Any]:
        return event(
            ts,
            CONTROLLER,
            "controller event processed",
            event_type="FenceStaleBrokers",
            queue_ms=queue_ms,
            process_ms=process_ms,
        )

    return [
        event(1_500, "broker-2", "fetcher started"),
        processed(7_000, 99.0, 99.0),  # before the failover: not its event
        event(8_000, CONTROLLER, "broker failure detected", broker_id=2, reason="session expired"),
        applied(8_000, 1, 0, 4),  # an older epoch: not this election's
        elected(8_050, 0, 1, 5),
        elected(8_060, 1, 3, 7),
        processed(8_070, 12.5, 40.0),
        applied(8_100, 1, 0, 5),
        applied(8_300, 3, 1, 7),
        event(9_000, CONTROLLER, "broker failure detected", broker_id=2, reason="fenced"),
        event(16_000, "broker-1", "fetcher started"),
        event(20_000, CONTROLLER, "broker failure detected", broker_id=1, reason="session expired"),
        processed(20_005, 1.0, 2.0),
    ]


def _ops() -> list[tuple]:
    acks = [(1_950, 0), (8_200, 0), (8_300, 0), (1_990, 1), (8_400, 1), (1_999, 2), (2_010, 2)]
    return [
        nemesis(2_000, "kill", "broker-2"),
        nemesis(5_000, "restart", "broker-1"),  # brings a node back: not a fault
        *[send_ok(ts, "t", p) for ts, p in acks],
    ]


def test_failover_timeline(spark: SparkSession) -> None:
    samples = samples_df(
        spark, [sample(15_000, "broker-1", "up", 1), sample(1_000, "broker-2", "up", 1)]
    )
    timeline, elected, gaps = failovers(events_df(spark, _events()), samples, ops_df(spark, _ops()))
    first, second = (r.asDict() for r in timeline.collect())
    assert first == {
        "failover_id": 1,
        "broker_id": 2,
        "controller": CONTROLLER,
        "mode": "raft",
        "reason": "session expired",
        "fault_from": "nemesis",
        "fault_ms": 2_000,
        "detected_ms": 8_000,
        "detect_ms": 6_000.0,
        "event_type": "FenceStaleBrokers",
        "queue_ms": 12.5,
        "election_ms": 40.0,
        "elections": 2,
        "propagation_ms": 240.0,
        "apply_ms": None,
        "unavailability_ms": 6_410.0,
        "partitions": None,
        "size_from": None,
    }
    assert second == {
        "failover_id": 2,
        "broker_id": 1,
        "controller": CONTROLLER,
        "mode": "raft",
        "reason": "session expired",
        "fault_from": "last seen",
        "fault_ms": 16_000,
        "detected_ms": 20_000,
        "detect_ms": 4_000.0,
        "event_type": "FenceStaleBrokers",
        "queue_ms": 1.0,
        "election_ms": 2.0,
        "elections": 0,
        "propagation_ms": None,
        "apply_ms": None,
        "unavailability_ms": None,
        "partitions": None,
        "size_from": None,
    }
    per_partition = [
        (r.partition, r.applied_ms, r.propagation_ms)
        for r in elected.orderBy("partition").collect()
    ]
    assert per_partition == [(0, 8_100, 50.0), (1, 8_300, 240.0)]
    first_gaps = [
        (r.partition, r.elected, r.last_ack_before_ms, r.first_ack_after_ms, r.unavailability_ms)
        for r in gaps.where("failover_id = 1").collect()
    ]
    assert first_gaps == [
        (0, True, 1_950, 8_200, 6_250.0),
        (1, True, 1_990, 8_400, 6_410.0),
        (2, False, 1_999, 2_010, 11.0),
    ]


def test_without_history_or_elections(spark: SparkSession) -> None:
    events = [e for e in _events() if e["event"] in ("broker failure detected", "fetcher started")]
    samples = samples_df(spark, [sample(1_000, "broker-2", "up", 1)])
    timeline, elected, gaps = failovers(events_df(spark, events), samples, ops_df(spark, []))
    rows = [
        (r.broker_id, r.fault_from, r.detect_ms, r.elections, r.queue_ms)
        for r in timeline.collect()
    ]
    # broker-2 last seen at 1500 (its log event, later than its snapshot)
    assert rows == [(2, "last seen", 6_500.0, 0, None), (1, "last seen", 4_000.0, 0, None)]
    assert elected.count() == 0
    assert gaps.count() == 0


def test_phase_breakdown(spark: SparkSession) -> None:
    samples = samples_df(spark, [sample(15_000, "broker-1", "up", 1)])
    timeline, _, _ = failovers(events_df(spark, _events()), samples, ops_df(spark, _ops()))
    got = [(r.phase, r.failovers, r.mean_ms, r.max_ms) for r in phase_breakdown(timeline).collect()]
    # detect 6000 and 4000; queue 12.5 and 1; election 40 and 2; propagation 240 (one failover)
    assert got == [
        ("detect", 2, 5_000.0, 6_000.0),
        ("propagation", 1, 240.0, 240.0),
        ("election", 2, 21.0, 40.0),
        ("queue", 2, 6.75, 12.5),
    ]
    shares = [r.share for r in phase_breakdown(timeline).collect()]
    assert shares[0] == pytest.approx(5_000 / (5_000 + 240 + 21 + 6.75))


def _change_sets() -> list[dict[str, Any]]:
    def change_set(ts: int, broker: int, name: str, apply_ms: float) -> dict[str, Any]:
        return event(ts, f"broker-{broker}", name, leaders=1, followers=0, apply_ms=apply_ms)

    return [
        change_set(8_050, 1, "applied metadata changes", 5.0),  # before t/0 applied: not its
        change_set(8_100, 1, "applied metadata changes", 30.0),
        change_set(8_300, 2, "applied LeaderAndIsr", 1.0),  # another broker's
        change_set(8_310, 3, "applied LeaderAndIsr", 110.0),
        change_set(8_400, 3, "applied LeaderAndIsr", 5.0),  # a later set of broker-3
    ]


def test_propagation_and_apply_split_at_the_change_set(spark: SparkSession) -> None:
    events = events_df(spark, _events() + _change_sets())
    timeline, elected, _ = failovers(events, samples_df(spark, []), ops_df(spark, _ops()))
    per_partition = [
        (r.partition, r.elected_ms, r.received_ms, r.applied_ms, r.propagation_ms, r.apply_ms)
        for r in elected.orderBy("partition").collect()
    ]
    assert per_partition == [
        (0, 8_050, 8_070, 8_100, 20.0, 30.0),
        (1, 8_060, 8_200, 8_300, 140.0, 100.0),
    ]
    first = timeline.where("failover_id = 1").first()
    # The slowest partition (t/1: 240 ms from election to application), split.
    assert (first.propagation_ms, first.apply_ms) == (140.0, 100.0)
    phases = {r.phase: r.max_ms for r in phase_breakdown(timeline).collect()}
    assert (phases["propagation"], phases["apply"]) == (140.0, 100.0)


def test_the_size_is_the_detecting_controllers_partition_count(spark: SparkSession) -> None:
    events = events_df(
        spark,
        [
            event(10_000, CONTROLLER, "broker failure detected", broker_id=2, reason="fenced"),
            # ZK mode: the controller is a broker that ships no GlobalPartitionCount here
            event(50_000, "broker-1", "broker failure detected", broker_id=3, reason="fenced"),
        ],
    )
    samples = samples_df(
        spark,
        [
            sample(5_000, CONTROLLER, GLOBAL_PARTITIONS, 0),  # not active yet: not a count
            sample(7_000, CONTROLLER, GLOBAL_PARTITIONS, 3_000),
            sample(9_000, "controller-3001", GLOBAL_PARTITIONS, 7_777),  # not the detecting one
            sample(10_500, CONTROLLER, GLOBAL_PARTITIONS, 3_100),  # after the detection
            sample(45_000, "broker-1", LEADER_COUNT, 400),
            sample(49_000, "broker-1", LEADER_COUNT, 500),
            sample(49_500, "broker-2", LEADER_COUNT, 600),
            sample(51_000, "broker-2", LEADER_COUNT, 999),  # after the detection
        ],
    )
    sizes = cluster_sizes(detections(events), samples)
    got = [
        (r.failover_id, r.partitions, r.size_from) for r in sizes.orderBy("failover_id").collect()
    ]
    assert got == [(1, 3_000, "controller"), (2, 1_100, "brokers")]
    timeline, _, _ = failovers(events, samples, ops_df(spark, []))
    assert [r.partitions for r in timeline.collect()] == [3_000, 1_100]


def test_per_size_medians(spark: SparkSession) -> None:
    """Per metadata mode and size: a report over both modes' benchmarks keeps them apart."""
    columns = ["mode", "partitions", "detect_ms", "queue_ms", "election_ms", "propagation_ms",
               "apply_ms", "unavailability_ms"]  # fmt: skip
    rows = [
        ("raft", 3_000, 100.0, 1.0, 10.0, 50.0, 10.0, 900.0),
        ("raft", 3_000, 600.0, 3.0, 30.0, 70.0, None, 1_500.0),
        ("raft", 3_000, 200.0, 2.0, 20.0, 60.0, 30.0, None),
        ("raft", 1_000, 50.0, 1.0, 5.0, 20.0, 4.0, 500.0),
        ("raft", 1_000, 70.0, 2.0, 7.0, 40.0, 6.0, 900.0),
        ("zk", 1_000, 300.0, 1.0, 5.0, 20.0, 4.0, 2_000.0),
        ("raft", None, 9_999.0, 9.0, 9.0, 9.0, 9.0, 9_999.0),  # no known size: left out
    ]
    timeline = spark.createDataFrame(
        rows, "mode string, partitions long, " + ", ".join(f"{c} double" for c in columns[2:])
    )
    got = [r.asDict() for r in per_size(timeline).collect()]
    assert got == [
        {"mode": "raft", "partitions": 1_000, "failovers": 2, "detect_ms": 60.0, "queue_ms": 1.5,
         "election_ms": 6.0, "propagation_ms": 30.0, "apply_ms": 5.0,
         "median_unavailability_ms": 700.0, "max_unavailability_ms": 900.0},
        {"mode": "raft", "partitions": 3_000, "failovers": 3, "detect_ms": 200.0, "queue_ms": 2.0,
         "election_ms": 20.0, "propagation_ms": 60.0, "apply_ms": 20.0,
         "median_unavailability_ms": 1_200.0, "max_unavailability_ms": 1_500.0},
        {"mode": "zk", "partitions": 1_000, "failovers": 1, "detect_ms": 300.0, "queue_ms": 1.0,
         "election_ms": 5.0, "propagation_ms": 20.0, "apply_ms": 4.0,
         "median_unavailability_ms": 2_000.0, "max_unavailability_ms": 2_000.0},
    ]  # fmt: skip


def test_the_mode_of_a_failover_comes_from_its_controller(spark: SparkSession) -> None:
    """A dedicated controller process is Raft mode's; a controller inside a broker process
    logs its broker's metadata_mode (ZK, or Raft when combined)."""
    events = [
        event(100_000, "controller-3001", "broker failure detected", broker_id=2, reason="fenced"),
        event(400_000, "broker-1", "broker failure detected", broker_id=3, reason="fenced",
              metadata_mode="zk"),
        event(700_000, "broker-2", "broker failure detected", broker_id=1, reason="fenced",
              metadata_mode="raft"),
    ]  # fmt: skip
    timeline, _, _ = failovers(events_df(spark, events), samples_df(spark, []), ops_df(spark, []))
    assert [r.mode for r in timeline.orderBy("failover_id").collect()] == ["raft", "zk", "raft"]


def test_a_partition_another_sampler_wrote_has_no_gap(spark: SparkSession) -> None:
    """Two runs in one report: t/9 was written only by an earlier run's sampler (last ack 200 s
    before this fault) and a later one's; it was not being written at this fault."""
    events = [event(300_000, CONTROLLER, "broker failure detected", broker_id=2, reason="fenced")]
    ops = [
        nemesis(299_000, "kill", "broker-2"),
        *[
            send_ok(ts, "t", p)
            for ts, p in [(298_500, 0), (301_000, 0), (100_000, 9), (400_000, 9)]
        ],
    ]
    timeline, _, gaps = failovers(
        events_df(spark, events), samples_df(spark, []), ops_df(spark, ops)
    )
    assert [(r.partition, r.unavailability_ms) for r in gaps.collect()] == [(0, 2_500.0)]
    assert timeline.first().unavailability_ms == 2_500.0


def _fencing_then_shutdown() -> list[dict[str, Any]]:
    """Raft: the controller fences the killed broker-2 (detected at 8000 by a FenceDeadBroker
    event, which commits in batches: its two elections are logged at 9400 and 9410, once the
    last batch committed, and the event itself at 9420: queue 0.5 ms, processing 1400 ms); the
    restarted broker re-registers (processed at 12000); 20 s later it shuts down in a controlled
    way: its partitions are re-elected again (previous leader 2, by BrokerHeartbeat events, at
    30000 and 30010), and the controller processes more events after that (31000, 32000)."""

    def elected(ts: int, partition: int, epoch: int, event_type: str, cause: str) -> dict:
        return event(
            ts,
            CONTROLLER,
            "leader election",
            topic="t",
            partition=partition,
            leader=1,
            previous_leader=2,
            leader_epoch=epoch,
            isr=[1, 3],
            cause=cause,
            unclean=False,
            event_type=event_type,
        )

    def processed(ts: int, event_type: str, queue_ms: float, process_ms: float) -> dict:
        return event(
            ts,
            CONTROLLER,
            "controller event processed",
            event_type=event_type,
            queue_ms=queue_ms,
            process_ms=process_ms,
            records=2,
            error="NONE",
        )

    return [
        processed(7_000, "AlterPartition", 9.0, 9.0),  # before the detection
        event(
            8_000,
            CONTROLLER,
            "broker failure detected",
            broker_id=2,
            broker_epoch=4,
            reason="process_dead",
            event_type="FenceDeadBroker",
        ),
        elected(9_400, 0, 5, "FenceDeadBroker", "offline"),
        elected(9_410, 1, 7, "FenceDeadBroker", "offline"),
        processed(9_420, "FenceDeadBroker", 0.5, 1_400.0),
        processed(12_000, "BrokerRegistration", 0.1, 30.0),
        elected(30_000, 0, 6, "BrokerHeartbeat", "controlled_shutdown"),
        elected(30_010, 1, 8, "BrokerHeartbeat", "controlled_shutdown"),
        processed(30_020, "BrokerHeartbeat", 0.2, 25.0),
        processed(31_000, "BrokerRegistration", 0.3, 31.0),
        processed(32_000, "ControlledShutdown", 0.4, 57.0),
    ]


def test_the_failover_is_the_event_that_fenced_and_only_its_elections(
    spark: SparkSession,
) -> None:
    events = events_df(spark, _fencing_then_shutdown())
    ops = ops_df(
        spark, [nemesis(7_500, "kill", "broker-2"), nemesis(11_000, "restart", "broker-2")]
    )
    timeline, elected, _ = failovers(events, samples_df(spark, []), ops)
    row = timeline.first()
    assert (row.event_type, row.queue_ms, row.election_ms) == ("FenceDeadBroker", 0.5, 1_400.0)
    assert row.elections == 2
    got = [(r.partition, r.leader_epoch, r.cause) for r in elected.orderBy("partition").collect()]
    assert got == [(0, 5, "offline"), (1, 7, "offline")]


def test_a_gap_needs_an_acknowledgement_just_before_the_fault(spark: SparkSession) -> None:
    """The sampler writes every 100 ms: t/0 was being written at the kill (100000), its gap is
    1050 ms. t/5 was last acknowledged 40 s before it (an earlier step's sampler) and t/6 10 s
    before it, both again only in a later step (130000): they were not being written at the
    fault and have no gap."""
    events = [event(100_300, CONTROLLER, "broker failure detected", broker_id=2, reason="fenced")]
    acks = [(99_950, 0), (101_000, 0), (101_100, 0), (60_000, 5), (130_000, 5), (90_000, 6),
            (130_050, 6)]  # fmt: skip
    ops = [nemesis(100_000, "kill", "broker-2"), *[send_ok(ts, "t", p) for ts, p in acks]]
    timeline, _, gaps = failovers(
        events_df(spark, events), samples_df(spark, []), ops_df(spark, ops)
    )
    got = [(r.partition, r.last_ack_before_ms, r.first_ack_after_ms) for r in gaps.collect()]
    assert got == [(0, 99_950, 101_000)]
    assert timeline.first().unavailability_ms == 1_050.0


def test_another_runs_application_of_the_same_epoch_is_not_this_failovers(
    spark: SparkSession,
) -> None:
    """Two runs in one report reuse topic names, broker ids and leader epochs: broker-1 applied
    t/0 at epoch 5 in an earlier run (40000) and again in this one (100120), after this
    failover's election (detected at 100000, elected at 100050)."""
    events = [
        event(40_000, "broker-1", "partition leadership applied", topic="t", partition=0,
              role_in_partition="leader", leader=1, leader_epoch=5),
        event(100_000, CONTROLLER, "broker failure detected", broker_id=2, reason="fenced"),
        event(100_050, CONTROLLER, "leader election", topic="t", partition=0, leader=1,
              previous_leader=2, leader_epoch=5, isr=[1], cause="offline", unclean=False),
        event(100_120, "broker-1", "partition leadership applied", topic="t", partition=0,
              role_in_partition="leader", leader=1, leader_epoch=5),
    ]  # fmt: skip
    timeline, elected, _ = failovers(
        events_df(spark, events), samples_df(spark, []), ops_df(spark, [])
    )
    assert [(r.applied_ms, r.propagation_ms) for r in elected.collect()] == [(100_120, 70.0)]
    assert timeline.first().propagation_ms == 70.0
