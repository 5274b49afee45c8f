"""The ZK-mode metadata cache (Kafka's ZkMetadataCache): UpdateMetadata requests -> images.

A ZK-mode broker has no metadata log; the controller sends it UpdateMetadata instead. Each one
is folded into the same immutable `MetadataImage` the standalone broker builds from records, so
Metadata, DescribeCluster and DescribeConfigs read one model in both modes:

- `live_brokers` replaces the broker list (every live broker is unfenced, as Kafka's cache
  holds only live brokers);
- each partition state replaces that partition; a leader of -2 (LeaderDuringDelete) removes
  the partition, and a topic left without partitions goes away;
- a topic named with another topic id than the cached one is the recreated topic: the old one's
  partitions are dropped first (KIP-516).

Topic configs and SCRAM credentials do not travel in UpdateMetadata (Kafka's brokers read
`/config/topics` and `/config/users` from ZooKeeper themselves); `with_topic_configs` and
`with_scram_credentials` put what the wiring learnt into the image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.metadata.image import (
    TOPIC_RESOURCE,
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    ConfigurationsImage,
    MetadataImage,
    PartitionRegistration,
    ScramImage,
    TopicImage,
    TopicsImage,
)
from protocol.metadata.records import BrokerEndpoint
from protocol.scram import ScramCredential

LEADER_DURING_DELETE = -2
"""Kafka's LeaderAndIsr.LeaderDuringDelete."""


def apply_update_metadata(image: MetadataImage, request: UpdateMetadataRequest) -> MetadataImage:
    """The image after `request` (pure)."""
    brokers = {
        b.id: BrokerRegistration(
            broker_id=b.id,
            incarnation_id="",
            epoch=-1,
            endpoints=tuple(
                BrokerEndpoint(
                    name=e.listener.upper(),
                    host=e.host,
                    port=e.port,
                    security_protocol=e.security_protocol,
                )
                for e in b.endpoints
            ),
            rack=b.rack,
            fenced=False,
        )
        for b in request.live_brokers
    }
    by_id: dict[str, TopicImage] = dict(image.topics.by_id)
    for topic_state in request.topic_states:
        current = by_id.get(topic_state.topic_id)
        stale = image.topics.get_topic(topic_state.topic_name)
        if stale is not None and stale.topic_id != topic_state.topic_id:
            by_id.pop(stale.topic_id, None)
        partitions = dict(current.partitions) if current is not None else {}
        for p in topic_state.partition_states:
            if p.leader == LEADER_DURING_DELETE:
                partitions.pop(p.partition_index, None)
                continue
            partitions[p.partition_index] = PartitionRegistration(
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
            )
        if partitions:
            by_id[topic_state.topic_id] = TopicImage(
                topic_state.topic_name, topic_state.topic_id, MappingProxyType(partitions)
            )
        else:
            by_id.pop(topic_state.topic_id, None)
    topics = TopicsImage(
        by_id=MappingProxyType(by_id),
        by_name=MappingProxyType({t.name: t for t in by_id.values()}),
    )
    return replace(image, cluster=ClusterImage(MappingProxyType(brokers)), topics=topics)


def with_topic_configs(
    image: MetadataImage, topic: str, configs: Mapping[str, str]
) -> MetadataImage:
    """The image with `topic`'s dynamic configs replaced by `configs` (empty removes them)."""
    resources = dict(image.configs.resources)
    key = ConfigResource(TOPIC_RESOURCE, topic)
    if configs:
        resources[key] = MappingProxyType(dict(configs))
    else:
        resources.pop(key, None)
    return replace(image, configs=ConfigurationsImage(MappingProxyType(resources)))


def with_scram_credentials(
    image: MetadataImage, user: str, credentials: Mapping[int, ScramCredential]
) -> MetadataImage:
    """The image with `user`'s SCRAM credentials replaced by `credentials` (mechanism id ->
    credential; empty removes the user)."""
    mechanisms = {m: dict(users) for m, users in image.scram.mechanisms.items()}
    for users in mechanisms.values():
        users.pop(user, None)
    for mechanism, credential in credentials.items():
        mechanisms.setdefault(mechanism, {})[user] = credential
    scram = ScramImage(
        MappingProxyType({m: MappingProxyType(u) for m, u in mechanisms.items() if u})
    )
    return replace(image, scram=scram)
