"""Failover timelines on a hand-made story with known answers.

Failover 1: the nemesis kills broker-2 at t=2000 (chaos history); the controller detects it at
8000 (and again at 9000: the same failure); it elects t/0 (leader 1, epoch 5) at 8050 and t/1
(leader 3, epoch 7) at 8060; the event that elected them is logged at 8070 (queue 12.5 ms,
processing 40 ms); broker-1 applies t/0 at 8100, broker-3 applies t/1 at 8300. The producer's
last acks before the kill: t/0 at 1950, t/1 at 1990, t/2 (led by broker 1, not elected) at
1999; the first after: t/0 8200, t/1 8400, t/2 2010.

Failover 2: broker-1 detected at 20000 with no nemesis op against it: its last sign of life is
a log event at 16000 (a snapshot at 15000); nothing elected; the next processed event at 20005.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from analytics.transforms.failovers import failovers, phase_breakdown
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
        "unavailability_ms": 6_410.0,
    }
    assert second == {
        "failover_id": 2,
        "broker_id": 1,
        "controller": CONTROLLER,
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
        "unavailability_ms": None,
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
