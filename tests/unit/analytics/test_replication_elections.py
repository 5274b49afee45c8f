"""Replication health, ISR changes, elections and the controller queue on hand-made frames."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from analytics.transforms import elections as el
from analytics.transforms import replication as rep
from protocol import metric_names as names
from tests.support.telemetry_frames import (
    counter,
    event,
    events_df,
    histogram,
    sample,
    samples_df,
)

URP = names.UNDER_REPLICATED_PARTITIONS
OFFLINE = names.OFFLINE_PARTITIONS_COUNT
SHRINKS = names.ISR_SHRINKS.removesuffix("_total")  # counter() appends it


def test_partition_health_and_peaks(spark: SparkSession) -> None:
    samples = samples_df(
        spark,
        [
            sample(0, "broker-1", URP, 0),
            sample(10_000, "broker-1", URP, 3),
            sample(20_000, "broker-1", URP, 3),
            sample(20_000, "broker-2", URP, 1),
            sample(10_000, "controller-3000", OFFLINE, 2),
            sample(10_000, "broker-1", "unrelated", 42),
        ],
    )
    health = rep.partition_health(samples)
    assert health.count() == 5
    peaks = {r.metric: (r.max, r.max_ts_ms) for r in rep.health_peaks(health).collect()}
    assert peaks == {
        "UnderReplicatedPartitions": (3.0, 10_000),
        "OfflinePartitionsCount": (2.0, 10_000),
    }


def test_isr_changes_and_counts(spark: SparkSession) -> None:
    events = events_df(
        spark,
        [
            event(
                1_000,
                "broker-1",
                "isr shrink",
                topic="t",
                partition=0,
                leader_epoch=3,
                old_isr=[1, 2, 3],
                new_isr=[1, 3],
            ),
            event(
                5_000,
                "broker-1",
                "isr expand",
                topic="t",
                partition=0,
                leader_epoch=3,
                old_isr=[1, 3],
                new_isr=[1, 2, 3],
            ),
            event(6_000, "broker-1", "something else"),
        ],
    )
    changes = [(r.change, r.old_isr, r.new_isr) for r in rep.isr_changes(events).collect()]
    assert changes == [("shrink", [1, 2, 3], [1, 3]), ("expand", [1, 3], [1, 2, 3])]
    samples = samples_df(
        spark,
        [
            counter(0, "broker-1", SHRINKS, 0),
            counter(10_000, "broker-1", SHRINKS, 2),
            counter(20_000, "broker-1", SHRINKS, 1),  # restarted, then one more
        ],
    )
    counts = [
        (r.source, r.change, r.changes)
        for r in rep.isr_change_counts(rep.isr_change_increases(samples)).collect()
    ]
    assert counts == [("broker-1", "shrink", 3)]


def test_isr_change_counts_add_up_to_the_events(spark: SparkSession) -> None:
    """Issue 17: "0 shrinks beside an events table listing 143": the controller's shrinks (a
    fenced broker removed from every ISR) are logged by the leaders but not counted by their
    IsrShrinksPerSec. The per-broker table counts the events too, so it adds up to the events
    table, and the leader's own proposals equal the counter."""

    def shrink(ts: int, source: str, origin: str) -> dict:
        return event(ts, source, "isr shrink", topic="t", partition=ts % 7, leader_epoch=1,
                     old_isr=[1, 2, 3], new_isr=[1, 3], origin=origin)  # fmt: skip

    events = events_df(
        spark,
        [shrink(1_000, "broker-1", "alter_partition"), shrink(2_000, "broker-1", "alter_partition"),
         shrink(3_000, "broker-3", "controller"), shrink(4_000, "broker-3", "controller")],
    )  # fmt: skip
    samples = samples_df(
        spark,
        [counter(0, "broker-1", SHRINKS, 0), counter(10_000, "broker-1", SHRINKS, 2),
         counter(0, "broker-3", SHRINKS, 0), counter(10_000, "broker-3", SHRINKS, 0)],
    )  # fmt: skip
    changes = rep.isr_changes(events)
    counts = rep.isr_change_counts(rep.isr_change_increases(samples), changes).collect()
    assert [(r.source, r.change, r.changes, r.events, r.events_proposed) for r in counts] == [
        ("broker-1", "shrink", 2, 2, 2),
        ("broker-3", "shrink", 0, 2, 0),
    ]
    assert sum(r.events for r in counts) == changes.where("change = 'shrink'").count()


def _election(ts: int, partition: int, cause: str, unclean: bool = False) -> dict:
    return event(
        ts,
        "controller-3000",
        "leader election",
        topic="t",
        partition=partition,
        leader=1,
        previous_leader=2,
        leader_epoch=4,
        isr=[1],
        cause=cause,
        unclean=unclean,
    )


def test_elections_by_cause(spark: SparkSession) -> None:
    events = events_df(
        spark,
        [
            _election(1_000, 0, "offline"),
            _election(1_000, 1, "offline"),
            _election(2_000, 2, "unclean", unclean=True),
            _election(3_000, 0, "preferred"),
            event(3_000, "broker-1", "partition leadership applied", topic="t", partition=0),
        ],
    )
    elections = el.leader_elections(events)
    assert elections.count() == 4
    got = [(r.cause, r.elections, r.unclean) for r in el.elections_by_cause(elections).collect()]
    assert got == [("offline", 2, 0), ("preferred", 1, 0), ("unclean", 1, 1)]


def test_election_time_distribution_and_quantiles(spark: SparkSession) -> None:
    name = el.ELECTION_TIME
    rows = histogram(0, "controller-3000", name, {"10.0": 0, "100.0": 0, "+Inf": 0})
    rows += histogram(10_000, "controller-3000", name, {"10.0": 1, "100.0": 3, "+Inf": 4})
    buckets = el.election_time_buckets(samples_df(spark, rows))
    dist = [
        (r.lower, r.le, r.observations) for r in el.election_time_distribution(buckets).collect()
    ]
    assert dist == [(0.0, 10.0, 1.0), (10.0, 100.0, 2.0), (100.0, float("inf"), 1.0)]
    (q,) = el.election_time_quantiles(buckets).collect()
    # 4 elections: p50 rank 2 -> 10 + 90 * (2 - 1) / 2 = 55
    assert (q.observations, q.p50, q.p99) == (4.0, pytest.approx(55.0), 100.0)


def test_controller_queue(spark: SparkSession) -> None:
    rows = [
        sample(0, "controller-3000", el.QUEUE_SIZE, 0),
        sample(10_000, "controller-3000", el.QUEUE_SIZE, 5),
    ]
    rows += histogram(10_000, "controller-3000", el.QUEUE_TIME, {"1.0": 8, "10.0": 10, "+Inf": 10})
    samples = samples_df(spark, rows)
    assert [r.value for r in el.queue_size(samples).orderBy("ts_ms").collect()] == [0.0, 5.0]
    (wait,) = el.queue_wait(el.queue_wait_buckets(samples)).collect()
    assert (wait.observations, wait.p50) == (10.0, pytest.approx(0.625))
    events = events_df(
        spark,
        [
            event(
                1,
                "controller-3000",
                "controller event processed",
                event_type="BrokerChange",
                queue_ms=2.0,
                process_ms=10.0,
            ),
            event(
                2,
                "controller-3000",
                "controller event processed",
                event_type="BrokerChange",
                queue_ms=4.0,
                process_ms=30.0,
            ),
        ],
    )
    (types,) = el.controller_event_types(events).collect()
    assert (types.event_type, types.events, types.mean_queue_ms, types.max_process_ms) == (
        "BrokerChange",
        2,
        3.0,
        30.0,
    )
