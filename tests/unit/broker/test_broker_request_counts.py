"""BrokerTopicMetrics' TotalProduceRequests / FailedProduceRequests / TotalFetchRequests /
FailedFetchRequests as a leader's handlers count them (an in-process broker, its own registry):
per partition of a Produce that reached the append; per partition of every Fetch, consumers'
and followers', a follower's incremental fetch counting its whole session as Kafka's does (in
the counters within FLUSH_MS); failures only for the errors Kafka does not leave out; partitions
not hosted here in neither."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from prometheus_client import CollectorRegistry

from broker.handlers.fetch_totals import FLUSH_MS
from broker.metrics import BrokerMetrics
from broker.node import Broker
from protocol import metric_names as names
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.produce import (
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
)
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch
from tests.unit.broker.test_broker_follower_session_reads import (
    CONN,
    PARTITIONS,
    Clock,
    Follower,
    _lead_all,
)
from tests.unit.broker.test_broker_raft_cluster_changes import in_process_broker


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def leader(tmp_path: Path, registry: CollectorRegistry) -> Iterator[Broker]:
    """Broker 1, leader of t-0..t-49 (replicas 1, 2, 3), on a clock the test moves."""
    metrics = BrokerMetrics.create(registry)
    with in_process_broker(tmp_path, Clock(), metrics=metrics) as node:
        _lead_all(node)
        yield node


def counted(registry: CollectorRegistry, name: str, topic: str = "t") -> float:
    return registry.get_sample_value(name, {"topic": topic}) or 0.0


async def produce(leader: Broker, topic: str, partition: int) -> int:
    """One record to `topic`-`partition` (acks=1): the partition's error code."""
    records = build_batch([Record(value=b"v")])
    request = ProduceRequest(acks=1, timeout_ms=1000, topics=(
        ProduceTopic(name=topic, partitions=(ProducePartition(index=partition, records=records),)),
    ))  # fmt: skip
    response = await leader.apis.handle(RequestEnvelope(ApiKey.PRODUCE, 0, 2, "p", request), CONN)
    assert isinstance(response, ProduceResponse)
    return response.topics[0].partitions[0].error_code


async def consume(leader: Broker, topic: str, offsets: dict[int, int]) -> list[int]:
    """A consumer's sessionless fetch of `topic`'s partitions at `offsets`: their error codes."""
    parts = tuple(FetchPartition(index=p, fetch_offset=o) for p, o in offsets.items())
    request = FetchRequest(
        max_wait_ms=0, min_bytes=0, topics=(FetchTopic(name=topic, partitions=parts),)
    )
    response = await leader.apis.handle(RequestEnvelope(ApiKey.FETCH, 0, 3, "c", request), CONN)
    assert isinstance(response, FetchResponse)
    return [p.error_code for t in response.topics for p in t.partitions]


def broken(target: object, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `target.method` raise an unexpected error (a bug)."""

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(target, method, fail)


def test_produce_counts_the_partitions_that_reached_the_append(
    leader: Broker, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        assert await produce(leader, "t", 0) == 0
        assert await produce(leader, "t", 1) == 0
        assert await produce(leader, "nope", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        refused = await produce(leader, "__consumer_offsets", 0)
        assert refused == ErrorCode.INVALID_TOPIC_EXCEPTION
        broken(leader.partitions.partitions[TopicPartition("t", 2)].log, "append_as_leader",
               monkeypatch)  # fmt: skip
        assert await produce(leader, "t", 2) == ErrorCode.UNKNOWN_SERVER_ERROR

    trio.run(main)
    assert counted(registry, names.TOTAL_PRODUCE_REQUESTS) == 3
    assert counted(registry, names.FAILED_PRODUCE_REQUESTS) == 1  # the bug, only
    # Refused before any append, as Kafka's appendToLocalLog: counted, not failed.
    assert counted(registry, names.TOTAL_PRODUCE_REQUESTS, "__consumer_offsets") == 1
    assert counted(registry, names.FAILED_PRODUCE_REQUESTS, "__consumer_offsets") == 0
    total = registry.get_sample_value(names.TOTAL_PRODUCE_REQUESTS, {"topic": "nope"})
    assert total is None


def test_a_consumer_fetch_counts_each_partition_and_only_unexpected_failures(
    leader: Broker, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        assert await consume(leader, "t", {0: 0, 1: 0, 2: 0}) == [0, 0, 0]
        out_of_range = [ErrorCode.OFFSET_OUT_OF_RANGE]
        assert await consume(leader, "t", {0: 1000}) == out_of_range
        assert await consume(leader, "nope", {0: 0}) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        broken(leader.partitions, "leader", monkeypatch)
        assert await consume(leader, "t", {3: 0}) == [ErrorCode.UNKNOWN_SERVER_ERROR]

    trio.run(main)
    assert counted(registry, names.TOTAL_FETCH_REQUESTS) == 5
    assert counted(registry, names.FAILED_FETCH_REQUESTS) == 1
    assert registry.get_sample_value(names.TOTAL_FETCH_REQUESTS, {"topic": "nope"}) is None


def test_a_follower_fetch_counts_its_whole_session_within_a_second(
    leader: Broker, registry: CollectorRegistry
) -> None:
    clock = leader.clock
    assert isinstance(clock, Clock)
    follower = Follower(leader, 2)

    async def main() -> None:
        def total() -> float:
            return counted(registry, names.TOTAL_FETCH_REQUESTS)

        await follower.fetch()  # full: creates the session, every partition read
        assert total() == PARTITIONS
        await follower.fetch()  # incremental: reads nothing new, counts the session
        assert total() == 2 * PARTITIONS
        await follower.fetch()
        await follower.fetch()
        assert total() == 2 * PARTITIONS  # not yet: at most once per FLUSH_MS
        clock.now += FLUSH_MS
        await follower.fetch()
        assert total() == 5 * PARTITIONS  # the three since the last count
        follower.forget(0)
        await follower.fetch()  # the session lost a partition: counted anew at once
        assert total() == 5 * PARTITIONS + PARTITIONS - 1
        assert counted(registry, names.FAILED_FETCH_REQUESTS) == 0

    trio.run(main)
