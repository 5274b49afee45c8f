"""Raw-wire helpers shared by the broker integration tests (create, produce, fetch, offsets)."""

from __future__ import annotations

from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from protocol.messages.topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from tests.support.wire import WireClient


async def create_topic(
    c: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    resp = await c.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                    ),
                ),
            )
        )
    )
    assert resp.topics[0].error_code == 0, resp


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topics=(
            ProduceTopic(
                name=topic, partitions=(ProducePartition(index=partition, records=records),)
            ),
        ),
    )


async def produce(c: WireClient, topic: str, partition: int, records: bytes, acks: int = 1):
    resp = await c.request(produce_request(topic, partition, records, acks))
    return resp.topics[0].partitions[0]


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 1 << 20,
) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        topics=(
            FetchTopic(
                name=topic,
                partitions=(
                    FetchPartition(
                        index=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    ),
                ),
            ),
        ),
    )


async def fetch(
    c: WireClient,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 1 << 20,
):
    request = fetch_request(
        topic, partition, offset, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes
    )
    resp = await c.request(request)
    return resp.topics[0].partitions[0]


async def list_offset(c: WireClient, topic: str, partition: int, timestamp: int):
    resp = await c.request(
        ListOffsetsRequest(
            topics=(
                ListOffsetsTopic(
                    name=topic,
                    partitions=(ListOffsetsPartition(index=partition, timestamp=timestamp),),
                ),
            )
        )
    )
    return resp.topics[0].partitions[0]
