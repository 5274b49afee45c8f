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

Topic configs, SCRAM credentials and ACLs do not travel in UpdateMetadata (Kafka's brokers read
`/config/topics`, `/config/users` and `/kafka-acl*` from ZooKeeper themselves);
`with_topic_configs`, `with_scram_credentials` and `with_resource_acls` put what the wiring
learnt into the image.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from protocol.acls import AclBinding, PatternType, ResourceType
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.metadata.acls import acl_id
from protocol.metadata.image import (
    TOPIC_RESOURCE,
    AclsImage,
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


def with_resource_acls(
    image: MetadataImage,
    resource_type: ResourceType,
    pattern_type: PatternType,
    name: str,
    bindings: Iterable[AclBinding],
) -> MetadataImage:
    """The image with the ACLs of one resource pattern replaced by `bindings` (empty removes
    them). Each is keyed by `acl_id` (derived from the ACL): ZooKeeper keeps no ids, and a
    ZK-mode controller loading the same ACLs names them alike."""
    pattern = (resource_type, pattern_type, name)
    by_id = {
        i: a
        for i, a in image.acls.by_id.items()
        if (a.resource_type, a.pattern_type, a.resource_name) != pattern
    }
    for acl in bindings:
        if (acl.resource_type, acl.pattern_type, acl.resource_name) != pattern:
            raise ValueError(
                f"{acl} is not an ACL of {pattern_type.name} {resource_type.name}:{name}"
            )
        by_id[acl_id(acl)] = acl
    return replace(image, acls=AclsImage(MappingProxyType(by_id)))
