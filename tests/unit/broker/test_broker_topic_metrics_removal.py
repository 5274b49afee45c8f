"""A topic's BrokerTopicMetrics series go once the broker hosts none of its partitions (Kafka's
ReplicaManager.maybeRemoveTopicMetrics): topics created and deleted do not pile up series."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from broker.metrics import BrokerTopicMetrics
from broker.partitions import PartitionManager
from broker.replica.partition_state import PartitionChange
from protocol import metric_names as names
from protocol.names import TopicPartition
from storage.log_manager import LogManager


def _host(partitions: PartitionManager, tp: TopicPartition) -> None:
    assert partitions.become(PartitionChange(tp, "tid", 1, 0, (1,), (1,)))


def test_the_hook_fires_when_the_last_partition_of_a_topic_goes(tmp_path: Path) -> None:
    gone: list[str] = []
    logs = LogManager([tmp_path], node_id=1)
    logs.startup()
    partitions = PartitionManager(logs, 1, lambda topic: {}, on_topic_gone=gone.append)
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    for tp in (a0, a1, b0):
        _host(partitions, tp)
    assert partitions.stop(a0, delete=True)
    assert gone == []  # a-1 is still here
    partitions.apply_leader_and_isr(deletes=[a1])  # ZK mode's path
    assert gone == ["a"]
    assert not partitions.stop(a1, delete=True)  # already gone: not again
    assert partitions.stop(b0, delete=False) and gone == ["a"]  # not deleted: kept
    assert partitions.stop(b0, delete=True) and gone == ["a", "b"]
    _host(partitions, a0)  # the topic again: counted afresh
    assert partitions.stop(a0, delete=True) and gone == ["a", "b", "a"]


def test_remove_topic_drops_every_series_of_the_topic_only() -> None:
    registry = CollectorRegistry()
    metrics = BrokerTopicMetrics(registry)
    for topic in ("a", "b"):
        metrics.appended(topic, 100, 2)
        metrics.sent_to_consumer(topic, 50)
        metrics.produced(topic, 0)
        metrics.fetched({topic: 1})
    metrics.remove_topic("a")
    metrics.remove_topic("never-seen")  # no series: nothing to do, no error
    for name in (names.BYTES_IN, names.MESSAGES_IN, names.BYTES_OUT,
                 names.TOTAL_PRODUCE_REQUESTS, names.TOTAL_FETCH_REQUESTS):  # fmt: skip
        assert registry.get_sample_value(name, {"topic": "a"}) is None, name
        assert registry.get_sample_value(name, {"topic": "b"}) is not None, name
    metrics.appended("a", 10, 1)  # written to again: a new series from zero
    assert registry.get_sample_value(names.MESSAGES_IN, {"topic": "a"}) == 1
