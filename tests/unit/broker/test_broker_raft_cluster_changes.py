"""broker.node in Raft mode (broker.metadata_feeds.raft_log): changes that only touch the registered brokers (RegisterBroker,
Fence/Unfence, controlled shutdown) reach the local partitions although no partition changed.

- KIP-841: a leader's ineligible replicas follow the image, so a broker back from fencing may
  rejoin the ISR (before the fix it stayed ineligible until the partition itself changed);
- a follower whose leader was not registered when its partition change arrived starts fetching
  once the leader registers (before the fix: only at the partition's next change).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.metadata_feeds.raft_log import RaftMetadataFeed
from broker.metrics import BrokerMetrics
from broker.node import Broker
from broker.partition_changes import PartitionChangeApplier
from deploy.node.broker_base import log_manager_for
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAg"
LED = TopicPartition("t", 0)
FOLLOWED = TopicPartition("t", 1)


class Unused:
    """Controller channel, metadata source and transport: never called by these tests."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


def raft_broker_config(tmp_path: Path, **extra: Any) -> BrokerConfig:
    """Broker 1 of a Raft-mode cluster whose one voter nobody dials (in-process tests)."""
    return BrokerConfig.from_values(
        {
            "node.id": 1,
            "metadata.mode": "raft",
            "process.roles": ["broker"],
            "controller.quorum.voters": "3001@127.0.0.1:9093",
            "controller.listener.names": ["CONTROLLER"],
            "log.dirs": [str(tmp_path / "logs")],
            **extra,
        }
    )


@contextmanager
def in_process_broker(
    tmp_path: Path,
    clock: Clock = SYSTEM_CLOCK,
    failpoints: Any = None,
    metrics: BrokerMetrics | None = None,
    **config: Any,
) -> Iterator[Broker]:
    """Broker 1 of `raft_broker_config`, in this process, on `clock`; its metadata comes from
    the test (`Feed`), nothing else is ever called. `metrics`: the process-wide ones if None."""
    broker_config = raft_broker_config(tmp_path, **config)
    log_manager = log_manager_for(broker_config, "c", clock)
    log_manager.startup()
    try:
        yield Broker(
            broker_config,
            log_manager=log_manager,
            controller=Unused(),  # type: ignore[arg-type]
            feed=RaftMetadataFeed(Unused()),  # type: ignore[arg-type]
            cluster_id="c",
            transport=Unused(),  # type: ignore[arg-type]
            clock=clock,
            failpoints=failpoints,
            metrics=metrics,
        )
    finally:
        log_manager.shutdown()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with in_process_broker(tmp_path) as node:
        yield node


def _register(broker_id: int, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"inc-{broker_id}-{epoch}",
        broker_epoch=epoch,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=19090 + broker_id),),
    )


class Feed:
    """Committed records with increasing offsets, published as one batch per call."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.offset = 0

    def __call__(self, *records: MetadataRecord) -> None:
        batch = []
        for record in records:
            batch.append((self.offset, record))
            self.offset += 1
        self.broker.publisher.publish(batch)


def _started(broker: Broker) -> Feed:
    """Brokers 1-3 registered and unfenced; t-0 led here (replicas 1,2,3), t-1 led by 4 (not
    registered yet); local changes applied (the initial catch-up's apply_full)."""
    feed = Feed(broker)
    feed(
        *(_register(b, b) for b in (1, 2, 3)),
        *(UnfenceBrokerRecord(id=b, epoch=b) for b in (1, 2, 3)),
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1
        ),
        PartitionRecord(partition_id=1, topic_id=TOPIC_ID, replicas=(4, 1), isr=(4, 1), leader=4),
    )
    broker.publisher.apply_full()
    return feed


def test_a_broker_back_from_fencing_becomes_eligible_for_the_isr_again(broker: Broker) -> None:
    feed = _started(broker)
    state = broker.partitions.partitions[LED].state
    assert state.is_leader and state.ineligible_replicas == frozenset()
    feed(FenceBrokerRecord(id=2, epoch=2))
    assert state.ineligible_replicas == frozenset({2})
    # Broker 2 restarts: a new registration (fenced), then unfenced; no partition changes.
    feed(_register(2, 100))
    assert state.ineligible_replicas == frozenset({2})
    feed(UnfenceBrokerRecord(id=2, epoch=100))
    assert state.ineligible_replicas == frozenset()


def _applier(broker: Broker) -> PartitionChangeApplier:
    assert isinstance(broker.feed, RaftMetadataFeed)
    return broker.feed.applier


def test_a_follower_fetches_once_its_unregistered_leader_registers(broker: Broker) -> None:
    feed = _started(broker)
    applier = _applier(broker)
    assert broker.fetchers is not None and applier.fetchers is broker.fetchers
    assert broker.fetchers.source_of(FOLLOWED) is None
    assert FOLLOWED in applier.waiting_for_leader
    feed(_register(4, 50))
    assert broker.fetchers.source_of(FOLLOWED) == 4
    assert applier.waiting_for_leader == {}


def test_a_later_change_replaces_the_wait_for_a_leader(broker: Broker) -> None:
    feed = _started(broker)
    applier = _applier(broker)
    # t-1 moves to this broker before 4 ever registers: it leads, nothing waits any more.
    feed(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=1, isr=(1,)))
    assert broker.partitions.partitions[FOLLOWED].state.is_leader
    assert applier.waiting_for_leader == {}
    feed(_register(4, 50))
    assert broker.fetchers is not None and broker.fetchers.source_of(FOLLOWED) is None


def test_a_partition_change_sets_only_its_own_ineligible_replicas(broker: Broker) -> None:
    """A partition change recomputes the ineligible replicas of the partitions it made leaders
    here, from the image, and no other's (before: every led partition per published batch,
    O(partitions) per batch during a failover)."""
    feed = _started(broker)
    feed(FenceBrokerRecord(id=3, epoch=3))
    led = broker.partitions.partitions[LED].state
    assert led.ineligible_replicas == frozenset({3})
    led.ineligible_replicas = frozenset({99})  # a marker: untouched by other partitions' changes
    feed(_register(4, 4), UnfenceBrokerRecord(id=4, epoch=4))  # brokers changed: all recomputed
    assert led.ineligible_replicas == frozenset({3})
    led.ineligible_replicas = frozenset({99})
    feed(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=1, isr=(1,)))
    taken = broker.partitions.partitions[FOLLOWED].state
    assert taken.is_leader and taken.ineligible_replicas == frozenset()
    assert led.ineligible_replicas == frozenset({99})


def test_a_shrink_then_the_fencing_of_a_lagging_follower_frees_the_hw(broker: Broker) -> None:
    """A Raft-mode shrink keeps the leader epoch, so the removed follower's times are not
    reset: until its fencing is published it counts as caught up outside the ISR (Kafka's HW
    rule) and holds the HW at its log end. Its fencing makes it ineligible, and the HW moves
    at once. Before, the HW stayed where the dead follower left it until the next append."""
    _started(broker)
    feed = Feed(broker)
    feed.offset = 100
    partition = broker.partitions.partitions[TopicPartition("t", 0)]
    state = partition.state
    now = state.clock_ms()
    for follower in (2, 3):
        state.update_follower_fetch(follower, 0, now, partition.log.log_end_offset)
    partition.log.append_as_leader(
        build_batch([Record(value=b"v%d" % i) for i in range(5)]), state.leader_epoch
    )
    state.update_local_leo(partition.log.log_end_offset)
    state.update_follower_fetch(3, 5, now, 5)  # 3 has everything, 2 nothing: HW 0
    assert state.high_watermark == 0
    feed(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 3)))
    assert state.isr == (1, 3) and state.leader_epoch == 0  # the same leader epoch
    feed(FenceBrokerRecord(id=2, epoch=2))
    assert state.ineligible_replicas == frozenset({2})
    assert state.high_watermark == 5


def test_an_isr_change_led_elsewhere_leaves_the_follower_fetching(broker: Broker) -> None:
    """A failover shrinks the ISR of every partition the dead broker followed; where this
    broker follows a leader that stays, the change keeps the leader epoch and the fetch goes
    on with the same state (Kafka starts fetchers only for a new leader epoch). Before, every
    such change removed the partition from its fetcher and added it back: 16,000 of them at
    25,000 partitions."""
    feed = _started(broker)
    feed(_register(4, 50), PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, isr=(4, 1)))
    assert broker.fetchers is not None and broker.fetchers.source_of(FOLLOWED) == 4
    fetcher = next(iter(broker.fetchers.fetchers.values()))
    forgotten: list[TopicPartition] = []
    forget = fetcher.forget

    def spy(tp: TopicPartition) -> None:
        forgotten.append(tp)
        forget(tp)

    fetcher.forget = spy  # type: ignore[method-assign]
    state = broker.partitions.partitions[FOLLOWED].state
    epochs = (state.leader_epoch, state.partition_epoch)
    feed(
        PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, replicas=(4, 1, 2), isr=(4, 1, 2))
    )
    assert state.isr == (4, 1, 2) and state.replicas == (4, 1, 2)
    assert (state.leader_epoch, state.partition_epoch) == (epochs[0], epochs[1] + 1)
    assert forgotten == [] and broker.fetchers.source_of(FOLLOWED) == 4
    # A new leader epoch (another leader, then 4 again) restarts the fetch.
    feed(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=2))
    feed(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=4))
    assert FOLLOWED in forgotten and broker.fetchers.source_of(FOLLOWED) == 4
    assert broker.fetchers.state_of(FOLLOWED).current_leader_epoch == epochs[0] + 2
