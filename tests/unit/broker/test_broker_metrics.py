"""broker.metrics: RequestMetrics (names, error counts, the time split, the server feeding
them), the server's connection counts, BrokerTopicMetrics (bytes, records, total and failed
produce/fetch partitions), and the ReplicaManager / purgatory / fetcher-lag / log size gauges
computed at scrape time. Each test has its own CollectorRegistry."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
import trio
from prometheus_client import CollectorRegistry

from broker.config import Listener
from broker.metrics import BrokerTopicMetrics, BrokerView, LogMetrics, ReplicaManagerMetrics
from broker.metrics.replica_manager import snapshot
from broker.metrics.requests import (
    RequestMetrics,
    RequestTiming,
    awaiting_remote,
    error_counts,
    metric_names,
    request_name,
)
from broker.metrics.socket_server import SocketServerMetrics
from broker.server import BrokerServer, ConnectionInfo
from protocol import metric_names as names
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey, Response
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.messages.topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.names import TopicPartition
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

TIMES = names.REQUEST_TIME_NAMES


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, labels)
    assert got is not None, f"no sample {name}{labels}"
    return got


def test_request_names_are_kafkas_and_fetch_is_split_by_who_asks() -> None:
    assert request_name(ApiKey.PRODUCE) == "Produce"
    assert request_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert request_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert metric_names(
        ApiKey.FETCH, FetchRequest(max_wait_ms=0, min_bytes=0, topics=(), replica_id=2)
    ) == ("Fetch", "FetchFollower")
    assert metric_names(ApiKey.FETCH, FetchRequest(max_wait_ms=0, min_bytes=0, topics=())) == (
        "Fetch",
        "FetchConsumer",
    )
    assert metric_names(ApiKey.METADATA, MetadataRequest()) == ("Metadata",)


def test_error_counts_take_the_response_and_every_partition() -> None:
    def part(i: int, code: ErrorCode) -> ProducePartitionResponse:
        return ProducePartitionResponse(index=i, error_code=int(code))

    response = ProduceResponse(
        topics=(
            ProduceTopicResponse(
                name="a", partitions=(part(0, ErrorCode.NONE), part(1, ErrorCode.NONE))
            ),
            ProduceTopicResponse(
                name="b", partitions=(part(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)
            ),
        )
    )
    # Each partition's code; the request-level NONE only where there are no entries.
    assert error_counts(response) == Counter(
        {int(ErrorCode.NONE): 2, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION): 1}
    )
    assert error_counts(MetadataResponse()) == Counter({0: 1})
    assert error_counts(ProduceResponse(topics=())) == Counter({0: 1})
    failed = ProduceResponse(topics=(), error_code=int(ErrorCode.NOT_CONTROLLER))
    assert error_counts(failed) == Counter({int(ErrorCode.NOT_CONTROLLER): 1})


def test_record_splits_the_request_time_as_kafka() -> None:
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry)
    timing = RequestTiming(
        received=10.000,
        dequeued=10.001,
        local_done=10.003,
        response_done=10.010,
        send_start=10.014,
        sent=10.015,
    )
    metrics.record(("Produce",), timing)
    expected = {
        "TotalTimeMs": 15,
        "RequestQueueTimeMs": 1,
        "LocalTimeMs": 2,
        "RemoteTimeMs": 7,
        "ResponseQueueTimeMs": 4,
        "ResponseSendTimeMs": 1,
    }
    for name, ms in expected.items():
        assert value(registry, TIMES[name] + "_sum", request="Produce") == pytest.approx(ms), name
        assert value(registry, TIMES[name] + "_count", request="Produce") == 1
    assert value(registry, names.REQUESTS, request="Produce") == 1
    # Never parked: no remote time, all of it local.
    metrics.record(("Metadata",), RequestTiming(1.0, 1.0, 0.0, 1.005, 1.005, 1.005))
    assert value(registry, TIMES["RemoteTimeMs"] + "_sum", request="Metadata") == 0
    assert value(registry, TIMES["LocalTimeMs"] + "_sum", request="Metadata") == pytest.approx(5)
    metrics.record_errors("Produce", Counter({0: 2, int(ErrorCode.NOT_ENOUGH_REPLICAS): 1}))
    assert value(registry, names.ERRORS, request="Produce", error="NONE") == 2
    errors = value(registry, names.ERRORS, request="Produce", error="NOT_ENOUGH_REPLICAS")
    assert errors == 1


class Parking:
    """DeleteTopics parks (awaiting_remote) until released; Metadata answers at once with an
    error in its response; anything else raises."""

    def __init__(self) -> None:
        self.parked = trio.Event()
        self.release = trio.Event()

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        if isinstance(request.body, DeleteTopicsRequest):
            awaiting_remote()
            self.parked.set()
            await self.release.wait()
            return DeleteTopicsResponse()
        if isinstance(request.body, MetadataRequest):
            return MetadataResponse(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        raise RuntimeError("boom")


async def test_the_server_records_every_request_with_its_remote_time_and_errors() -> None:
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry)
    handler = Parking()
    server = BrokerServer(handler, [Listener("PLAINTEXT", "127.0.0.1", 0)], metrics=metrics)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            await c.send(DeleteTopicsRequest(topic_names=()))
            await handler.parked.wait()
            await trio.sleep(0.02)  # a measurable stay in the purgatory (what is measured)
            handler.release.set()
            await c.receive(DeleteTopicsResponse)
            await c.send(MetadataRequest())
            await c.receive(MetadataResponse)
            await c.send(ProduceRequest(acks=1, timeout_ms=100, topics=()))
            await c.receive(ProduceResponse)  # the handler raised: UNKNOWN_SERVER_ERROR

            def recorded(api: str) -> bool:
                sample = registry.get_sample_value(names.REQUESTS, {"request": api})
                return sample == 1

            # The writer records right after the send: wait until it did.
            await wait_until(
                lambda: all(recorded(a) for a in ("DeleteTopics", "Metadata", "Produce")),
                within=5,
            )
        nursery.cancel_scope.cancel()
    remote = value(registry, TIMES["RemoteTimeMs"] + "_sum", request="DeleteTopics")
    total = value(registry, TIMES["TotalTimeMs"] + "_sum", request="DeleteTopics")
    assert 20 <= remote <= total
    assert value(registry, TIMES["RemoteTimeMs"] + "_sum", request="Metadata") == 0
    for api in ("DeleteTopics", "Metadata", "Produce"):
        assert value(registry, TIMES["TotalTimeMs"] + "_count", request=api) == 1
    assert value(registry, names.ERRORS, request="DeleteTopics", error="NONE") == 1
    authorization = value(
        registry,
        names.ERRORS,
        request="Metadata",
        error="CLUSTER_AUTHORIZATION_FAILED",
    )
    assert authorization == 1
    unknown = value(registry, names.ERRORS, request="Produce", error="UNKNOWN_SERVER_ERROR")
    assert unknown == 1


def test_topic_metrics_count_bytes_and_records_per_topic() -> None:
    registry = CollectorRegistry()
    topics = BrokerTopicMetrics(registry)
    topics.appended("a", 100, 3)
    topics.appended("a", 50, 2)
    topics.appended("b", 7, 1)
    topics.sent_to_consumer("a", 40)
    topics.replication_bytes_in.inc(9)
    assert value(registry, "kafka_server_brokertopicmetrics_bytesin_total", topic="a") == 150
    assert value(registry, "kafka_server_brokertopicmetrics_messagesin_total", topic="a") == 5
    assert value(registry, names.MESSAGES_IN, topic="b") == 1
    assert value(registry, names.BYTES_OUT, topic="a") == 40
    assert value(registry, names.REPLICATION_BYTES_IN) == 9


def test_produce_partitions_count_as_kafkas_append_counts_them() -> None:
    registry = CollectorRegistry()
    topics = BrokerTopicMetrics(registry)
    topics.produced("a", ErrorCode.NONE)
    # The client's or the cluster's state, not a broker failure: Kafka leaves them out.
    topics.produced("a", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    topics.produced("a", ErrorCode.MESSAGE_TOO_LARGE)
    topics.produced("a", ErrorCode.CORRUPT_MESSAGE)
    topics.produced("a", ErrorCode.INVALID_TOPIC_EXCEPTION)  # an internal topic, refused
    # Failures Kafka counts: processFailedRecord.
    topics.produced("a", ErrorCode.NOT_ENOUGH_REPLICAS)
    topics.produced("a", ErrorCode.INVALID_RECORD)
    topics.produced("b", ErrorCode.UNKNOWN_SERVER_ERROR)
    # Not hosted here: no count, no series (Kafka answers unknown topics before counting).
    topics.produced("typo", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert value(registry, names.TOTAL_PRODUCE_REQUESTS, topic="a") == 7
    assert value(registry, names.FAILED_PRODUCE_REQUESTS, topic="a") == 2
    assert value(registry, names.TOTAL_PRODUCE_REQUESTS, topic="b") == 1
    assert value(registry, names.FAILED_PRODUCE_REQUESTS, topic="b") == 1
    assert registry.get_sample_value(names.TOTAL_PRODUCE_REQUESTS, {"topic": "typo"}) is None


def test_fetch_partitions_count_per_fetch_and_failures_per_read() -> None:
    registry = CollectorRegistry()
    topics = BrokerTopicMetrics(registry)
    topics.fetched({"a": 3, "b": 1})
    topics.fetched({"a": 1})
    for code in (
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ):
        topics.fetch_read("a", code)  # Kafka's readFromLog does not mark these failed
    topics.fetch_read("a", ErrorCode.UNKNOWN_SERVER_ERROR)
    topics.fetch_read("b", ErrorCode.CORRUPT_MESSAGE)
    assert value(registry, names.TOTAL_FETCH_REQUESTS, topic="a") == 4
    assert value(registry, names.TOTAL_FETCH_REQUESTS, topic="b") == 1
    assert value(registry, names.FAILED_FETCH_REQUESTS, topic="a") == 1
    assert value(registry, names.FAILED_FETCH_REQUESTS, topic="b") == 1


@dataclass
class FakeLog:
    topic_partition: TopicPartition
    size: int


def test_log_size_is_read_per_log_at_scrape_time() -> None:
    registry = CollectorRegistry()
    metrics = LogMetrics(registry)
    assert registry.get_sample_value(names.LOG_SIZE, {"topic": "t", "partition": "0"}) is None
    logs = [FakeLog(TopicPartition("t", 0), 0), FakeLog(TopicPartition("t", 1), 4096)]
    owner = object()
    metrics.bind(owner, lambda: logs)
    assert value(registry, "kafka_log_log_size", topic="t", partition="0") == 0
    assert value(registry, names.LOG_SIZE, topic="t", partition="1") == 4096
    logs[0].size = 100  # an append: the next scrape sees it
    logs.pop()  # a deleted log: its series goes
    assert value(registry, names.LOG_SIZE, topic="t", partition="0") == 100
    assert registry.get_sample_value(names.LOG_SIZE, {"topic": "t", "partition": "1"}) is None
    metrics.unbind(owner)
    assert registry.get_sample_value(names.LOG_SIZE, {"topic": "t", "partition": "0"}) is None


def test_the_telemetry_shipper_does_not_walk_the_logs() -> None:
    """Log sizes are for Prometheus only: a snapshot for telemetry does not even read them."""
    from deploy.telemetry.snapshot import samples_of

    registry = CollectorRegistry()
    metrics = LogMetrics(registry)
    reads = []
    metrics.bind(object(), lambda: reads.append(1) or [FakeLog(TopicPartition("t", 0), 1)])
    assert samples_of(registry) == []
    assert reads == []
    assert value(registry, names.LOG_SIZE, topic="t", partition="0") == 1  # /metrics still does
    assert reads == [1]


async def test_connections_are_counted_per_listener_while_open() -> None:
    registry = CollectorRegistry()
    sockets = SocketServerMetrics(registry)
    listeners = [Listener("PLAINTEXT", "127.0.0.1", 0), Listener("INTERNAL", "127.0.0.1", 0)]
    server = BrokerServer(
        Parking(), listeners, metrics=RequestMetrics(registry), socket_metrics=sockets
    )
    count = names.CONNECTION_COUNT
    assert value(registry, count, listener="PLAINTEXT") == 0  # from the start, at zero
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        port = server.bound[0].port
        async with await WireClient.connect("127.0.0.1", port) as c:
            async with await WireClient.connect("127.0.0.1", port):
                await wait_until(lambda: value(registry, count, listener="PLAINTEXT") == 2)
                assert value(registry, count, listener="INTERNAL") == 0
            await wait_until(lambda: value(registry, count, listener="PLAINTEXT") == 1)
            await c.send(MetadataRequest())
            await c.receive(MetadataResponse)
        await wait_until(lambda: value(registry, count, listener="PLAINTEXT") == 0)
        nursery.cancel_scope.cancel()


@dataclass
class FakePartition:
    is_leader: bool
    is_under_replicated: bool = False
    is_under_min_isr: bool = False
    is_at_min_isr: bool = False


def test_replica_manager_gauges_are_read_at_scrape_time_from_the_bound_broker() -> None:
    registry = CollectorRegistry()
    metrics = ReplicaManagerMetrics(registry)
    # Unbound (no broker running yet): every gauge exists at zero.
    assert value(registry, names.UNDER_REPLICATED_PARTITIONS) == 0
    assert value(registry, names.PARTITION_COUNT) == 0
    partitions = [
        FakePartition(True, is_under_replicated=True, is_at_min_isr=True),
        FakePartition(True, is_under_replicated=True, is_under_min_isr=True),
        FakePartition(True),
        FakePartition(False, is_under_replicated=True),  # a follower's flags do not count
    ]
    waiting = {"Produce": 2, "Fetch": 5}
    fetcher = "ReplicaFetcherThread-0-2"
    lags = [(fetcher, TopicPartition("t", 0), 0), (fetcher, TopicPartition("t", 1), 12)]
    owner = object()
    metrics.bind(
        owner,
        BrokerView(
            partitions=lambda: partitions,
            purgatory_sizes={k: (lambda k=k: waiting[k]) for k in waiting},
            fetcher_lags=lambda: lags,
        ),
    )
    assert value(registry, names.PARTITION_COUNT) == 4
    assert value(registry, names.LEADER_COUNT) == 3
    assert value(registry, names.UNDER_REPLICATED_PARTITIONS) == 2
    assert value(registry, names.UNDER_MIN_ISR_PARTITION_COUNT) == 1
    assert value(registry, names.AT_MIN_ISR_PARTITION_COUNT) == 1
    purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
    assert value(registry, purgatory, delayedOperation="Produce") == 2
    assert value(registry, purgatory, delayedOperation="Fetch") == 5
    lag = "kafka_server_fetcherlagmetrics_consumerlag"
    assert value(registry, lag, clientId=fetcher, topic="t", partition="1") == 12
    # Values move with the broker, nothing to update by hand.
    partitions.pop(0)
    waiting["Fetch"] = 0
    assert value(registry, names.UNDER_REPLICATED_PARTITIONS) == 1
    assert value(registry, purgatory, delayedOperation="Fetch") == 0
    metrics.unbind(object())  # not the owner: still bound
    assert value(registry, names.PARTITION_COUNT) == 3
    metrics.unbind(owner)
    assert value(registry, names.PARTITION_COUNT) == 0
    metrics.isr_shrinks.inc()
    assert value(registry, names.ISR_SHRINKS) == 1
    assert value(registry, names.ISR_EXPANDS) == 0


def test_snapshot_takes_the_copy_again_when_trio_resized_it_meanwhile() -> None:
    calls = iter([RuntimeError("dictionary changed size during iteration"), [1, 2]])

    def racy() -> list[int]:
        got = next(calls)
        if isinstance(got, Exception):
            raise got
        return got

    assert snapshot(racy) == [1, 2]
