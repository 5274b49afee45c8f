"""broker.metrics.consumer_groups: the Kafka Exporter's consumer group lag series, computed at
scrape time from the bound broker's commits and the high watermarks it holds; and the group
coordinator's `committed_offsets` that feeds them. Each test has its own CollectorRegistry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.effects import GroupConfig, LoadedPartition
from broker.group.records import OffsetValue
from broker.metrics import ConsumerGroupMetrics, GroupOffsetsView
from protocol.names import TopicPartition

T0, T1, T2 = (TopicPartition("orders", p) for p in range(3))
ELSEWHERE = TopicPartition("audit", 0)


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    """label values (in label order) -> value, of every sample named `name`."""
    return {
        tuple(s.labels.values()): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == name
    }


def test_lag_per_partition_and_its_sum_and_max_per_group() -> None:
    registry = CollectorRegistry()
    metrics = ConsumerGroupMetrics(registry)
    commits = [
        ("billing", T0, 40),  # lag 60
        ("billing", T1, 10),  # lag 5
        ("billing", T2, 20),  # the commit is past the high watermark: lag 0, not -5
        ("billing", ELSEWHERE, 3),  # not hosted here: no series
        ("audit", T0, 100),  # caught up
        ("audit", T1, -1),  # no position committed: no series
    ]
    hws = {T0: 100, T1: 15, T2: 15}
    owner = object()
    metrics.bind(owner, GroupOffsetsView(lambda: commits, hws.get))

    assert samples(registry, "kafka_consumergroup_lag") == {
        ("billing", "orders", "0"): 60,
        ("billing", "orders", "1"): 5,
        ("billing", "orders", "2"): 0,
        ("audit", "orders", "0"): 0,
    }
    assert samples(registry, "kafka_consumergroup_current_offset") == {
        ("billing", "orders", "0"): 40,
        ("billing", "orders", "1"): 10,
        ("billing", "orders", "2"): 20,
        ("audit", "orders", "0"): 100,
    }
    assert samples(registry, "kafka_consumergroup_lag_sum") == {
        ("audit", "orders"): 0,
        ("billing", "orders"): 65,
    }
    assert samples(registry, "kafka_consumergroup_lag_max") == {("audit",): 0, ("billing",): 60}
    # The labels are the Kafka Exporter's.
    text = generate_latest(registry).decode()
    assert 'kafka_consumergroup_lag{consumergroup="billing",partition="0",topic="orders"} 60.0' in (
        text
    )

    # Read at scrape time: a new commit and new records move the lag, nothing else to call.
    commits[0] = ("billing", T0, 90)
    hws[T1] = 25
    assert samples(registry, "kafka_consumergroup_lag")[("billing", "orders", "0")] == 10
    assert samples(registry, "kafka_consumergroup_lag")[("billing", "orders", "1")] == 15
    assert samples(registry, "kafka_consumergroup_lag_max") == {("audit",): 0, ("billing",): 15}

    metrics.unbind(object())  # not the owner: still bound
    assert samples(registry, "kafka_consumergroup_lag")
    metrics.unbind(owner)
    assert samples(registry, "kafka_consumergroup_lag") == {}
    assert "# TYPE kafka_consumergroup_lag gauge" in generate_latest(registry).decode()


def test_the_coordinator_lists_the_commits_of_the_groups_it_serves() -> None:
    core = GroupCoordinatorCore(GroupConfig(num_partitions=1))
    assert list(core.committed_offsets()) == []
    core.begin_load(0, epoch=1)
    loaded = LoadedPartition(
        groups={}, offsets={"billing": {T0: OffsetValue(7), T1: OffsetValue(9)}}
    )
    assert core.complete_load(0, 1, loaded, now_ms=0)
    core.offsets_committed("billing", {T0: OffsetValue(8)})
    assert sorted(core.committed_offsets()) == [("billing", T0, 8), ("billing", T1, 9)]
    core.unload(0, None)  # another broker coordinates it now
    assert list(core.committed_offsets()) == []
