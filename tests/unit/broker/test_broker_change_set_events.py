"""The broker's one catalogued event per applied change set, in both metadata modes: "applied
metadata changes" (Raft, one publish step) and "applied LeaderAndIsr" (ZK, one request), with
apply_ms, the time from the change set's receipt to the event (the report's broker apply)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from broker.node import Broker
from protocol.metadata.records import PartitionChangeRecord
from tests.support.log_events import catalogued
from tests.unit.broker.test_broker_metadata_feeds import Made, _lai
from tests.unit.broker.test_broker_raft_cluster_changes import (
    TOPIC_ID,
    _started,
    in_process_broker,
)


class SteppingClock:
    """A clock the test moves, and that moves `step_ms` by itself at every monotonic read."""

    def __init__(self, step_ms: int = 0) -> None:
        self.now_ms = 1_000
        self.step_ms = step_ms
        self.reads: list[int] = []

    def wall_ms(self) -> int:
        return 1_790_000_000_000 + self.now_ms

    def monotonic_ms(self) -> int:
        self.now_ms += self.step_ms
        self.reads.append(self.now_ms)
        return self.now_ms


def test_raft_steps_count_from_when_the_records_were_read(tmp_path: Path) -> None:
    clock = SteppingClock()
    with in_process_broker(tmp_path, clock=clock) as broker:
        feed = _started(broker)
        received = clock.now_ms
        clock.now_ms += 250  # a later step: it waited behind the earlier ones
        change = PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=1, isr=(1,))
        with structlog.testing.capture_logs() as events:
            broker.publisher.publish([(feed.offset, change)], received_ms=received)
        (applied,) = catalogued(events, "applied metadata changes")
        assert (applied["leaders"], applied["followers"], applied["apply_ms"]) == (1, 0, 250.0)
        # Without a receipt time, publish is the receipt.
        change = PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=1, isr=(1, 4))
        with structlog.testing.capture_logs() as events:
            broker.publisher.publish([(feed.offset + 1, change)])
        (applied,) = catalogued(events, "applied metadata changes")
        assert applied["apply_ms"] == 0.0


@pytest.fixture
def zk_broker(tmp_path: Path) -> Iterator[Broker]:
    made = Made(tmp_path)
    try:
        yield made("zk")
    finally:
        for log_manager in made.log_managers:
            log_manager.shutdown()


def test_zk_leader_and_isr_is_timed_from_its_handling(zk_broker: Broker) -> None:
    clock = SteppingClock(step_ms=7)
    broker = zk_broker
    broker.partitions.clock = clock  # the handler times the request on the broker's clock
    requests = broker.feed.requests  # type: ignore[attr-defined]
    first = len(clock.reads)
    with structlog.testing.capture_logs() as events:
        requests.leader_and_isr(_lai((0, 1), (1, 2)))
    (applied,) = catalogued(events, "applied LeaderAndIsr")
    assert (applied["leaders"], applied["followers"]) == (1, 1)
    # From the handler's first clock read to its last (the partitions read it in between).
    assert applied["apply_ms"] == float(clock.reads[-1] - clock.reads[first]) > 0
    assert len(catalogued(events, "partition leadership applied")) == 2
