"""deploy.node.runtime: a node process has one clock and one failpoint registry, and the Broker it
builds hands both to every part that measures time or holds a failpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.node import Broker
from deploy.node.failpoints import Failpoints
from deploy.node.runtime import NodeRuntime
from protocol.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from protocol.names import TopicPartition
from tests.unit.broker.test_broker_raft_cluster_changes import in_process_broker

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAg"
LAG_MS = 10_000


class ManualClock:
    """A clock only the test moves."""

    def __init__(self) -> None:
        self.wall = 1_700_000_000_000
        self.monotonic = 5_000

    def wall_ms(self) -> int:
        return self.wall

    def monotonic_ms(self) -> int:
        return self.monotonic

    def advance(self, ms: int) -> None:
        self.wall += ms
        self.monotonic += ms


@pytest.fixture
def runtime() -> NodeRuntime:
    return NodeRuntime(
        clock=ManualClock(), failpoints=Failpoints("replica.follower.freeze_hw=return")
    )


@pytest.fixture
def broker(tmp_path: Path, runtime: NodeRuntime) -> Iterator[Broker]:
    with in_process_broker(
        tmp_path,
        runtime.clock,
        runtime.failpoints,
        **{"replica.lag.time.max.ms": LAG_MS},
    ) as node:
        yield node


def _lead_one_partition(broker: Broker) -> None:
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=19091)
    records = [
        *(
            RegisterBrokerRecord(
                broker_id=b, incarnation_id=f"inc-{b}", broker_epoch=b, endpoints=(endpoint,)
            )
            for b in (1, 2)
        ),
        *(UnfenceBrokerRecord(id=b, epoch=b) for b in (1, 2)),
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1, 2), leader=1),
    ]
    broker.publisher.publish(list(enumerate(records)))
    broker.publisher.apply_full()


def test_the_isr_expires_on_the_process_clock(broker: Broker, runtime: NodeRuntime) -> None:
    _lead_one_partition(broker)
    assert broker.partitions.partitions[TopicPartition("t", 0)].state.is_leader
    assert broker.alter_partition.maybe_shrink_isr() == 0
    runtime.clock.advance(LAG_MS + 1)  # type: ignore[attr-defined]
    # Only the injected clock moved: the follower is out of sync by it alone.
    assert broker.alter_partition.maybe_shrink_isr() == 1


def test_every_part_of_the_broker_shares_the_runtime(broker: Broker, runtime: NodeRuntime) -> None:
    clock, failpoints = runtime.clock, runtime.failpoints
    assert broker.partitions.clock is clock
    assert broker.fetchers is not None
    assert broker.fetchers.clock is clock
    assert broker.fetchers.failpoints is failpoints
    assert broker.group_coordinator.clock_ms == clock.wall_ms
    assert broker.group_coordinator.failpoints is failpoints
    assert broker.log_cleaner._now_ms == clock.wall_ms
    assert broker.log_cleaner._failpoints is failpoints
    assert broker.log_manager._clock == clock.wall_ms


def test_a_process_without_environment_has_the_system_clock_and_no_failpoints() -> None:
    runtime = NodeRuntime.from_environ({})
    assert runtime.failpoints.active() == {}
    before = runtime.clock.wall_ms()
    assert abs(before - runtime.clock.wall_ms()) < 60_000
