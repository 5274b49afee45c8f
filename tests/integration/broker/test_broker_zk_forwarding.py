"""ZK-mode brokers in-process: admin requests through the ControllerChannel (CreateTopics
answered once UpdateMetadata brought the topic), requests other brokers forwarded going to this
broker's own controller service, and topic configs set by the wiring reaching the logs."""

from __future__ import annotations

from pathlib import Path

from broker.metadata_feeds.zk import ZkMetadataFeed
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResource, ResourceType
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.metadata import MetadataRequest
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest
from protocol.names import TopicPartition
from tests.integration.broker.broker_wire import fetch, produce
from tests.integration.broker.zk_brokers import cluster_nursery, start_cluster, stop_cluster
from tests.support.wire import batch, records_of


class LocalService:
    """Stands for the broker's own ZkControllerService, not active: NOT_CONTROLLER."""

    def __init__(self) -> None:
        self.received: list[Request] = []

    async def submit(self, request: Request) -> Response:
        self.received.append(request)
        return AlterPartitionResponse(
            error_code=int(ErrorCode.NOT_CONTROLLER), error_message="not the controller"
        )


async def test_create_topics_waits_for_update_metadata_then_replicates(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path)
        async with await cluster.client(2) as c:
            resp = await c.request(
                CreateTopicsRequest(
                    topics=(CreatableTopic(name="t", num_partitions=2, replication_factor=3),)
                )
            )
            assert resp.topics[0].error_code == 0
            # Answered only once this broker's metadata has the topic and its leaders.
            meta = await c.request(MetadataRequest(topics=("t",)))
            assert meta.topics[0].error_code == 0
            assert [p.leader_id for p in meta.topics[0].partitions] == [1, 1]
            resp = await c.request(
                CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=3),))
            )
            assert resp.results[0].error_code == 0
            assert isinstance(cluster.controller.received[-1], CreatePartitionsRequest)
        async with await cluster.client(1) as c:
            r = await produce(c, "t", 1, batch([b"x"]), acks=-1)
            assert r.error_code == 0
            got = await fetch(c, "t", 1, 0)
            assert [rec.value for rec in records_of(got.records)] == [b"x"]
        await stop_cluster(cluster)


async def test_forwarded_requests_go_to_the_local_controller_service(tmp_path: Path) -> None:
    service = LocalService()
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path, ids=(1,), local_controller=service)
        request = AlterPartitionRequest(
            broker_id=2,
            broker_epoch=7,
            topics=(AlterPartitionTopic(topic_name="t", topic_id="x", partitions=()),),
        )
        async with await cluster.client(1) as c:
            await c.send(request, client_id="trioka-forwarded")
            _corr, resp = await c.receive(AlterPartitionResponse)
            assert resp.error_code == ErrorCode.NOT_CONTROLLER
            assert service.received == [request]
            # Any other client id goes through the broker's ControllerChannel.
            cluster.controller.fail_alter_partition = True
            resp = await c.request(request)
            assert resp.error_code == ErrorCode.NOT_CONTROLLER
            assert cluster.controller.received[-1] == request
            assert service.received == [request]
        await stop_cluster(cluster)


async def test_topic_configs_from_the_wiring_reach_the_logs(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path, ids=(1,))
        async with await cluster.client(1) as c:
            resp = await c.request(
                CreateTopicsRequest(
                    topics=(CreatableTopic(name="t", num_partitions=1, replication_factor=1),)
                )
            )
            assert resp.topics[0].error_code == 0
            feed = cluster.broker(1).feed
            assert isinstance(feed, ZkMetadataFeed)
            feed.set_topic_configs("t", {"retention.ms": "12345", "min.insync.replicas": "1"})
            the_log = cluster.log_of(1, TopicPartition("t", 0))
            assert the_log.config.retention_ms == 12345
            described = await c.request(
                DescribeConfigsRequest(
                    resources=(
                        DescribeConfigsResource(
                            resource_type=ResourceType.TOPIC,
                            resource_name="t",
                            configuration_keys=("retention.ms",),
                        ),
                    )
                )
            )
            assert described.results[0].configs[0].value == "12345"
        await stop_cluster(cluster)
