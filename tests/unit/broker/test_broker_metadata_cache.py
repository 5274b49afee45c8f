"""broker.metadata_cache: UpdateMetadata requests folded into MetadataImages (pure)."""

from __future__ import annotations

import pytest

from broker.metadata_cache import (
    LEADER_DURING_DELETE,
    apply_update_metadata,
    with_resource_acls,
    with_scram_credentials,
    with_topic_configs,
)
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from protocol.metadata.acls import acl_id
from protocol.metadata.image import MetadataImage
from protocol.scram import ScramCredential


def _state(pid: int, leader: int, epoch: int = 0) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        partition_index=pid,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=(1, 2),
        partition_epoch=epoch,
        replicas=(1, 2, 3),
        offline_replicas=(3,),
    )


def _request(topics: dict[tuple[str, str], list], brokers: tuple[int, ...] = (1, 2)):
    return UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=1,
        broker_epoch=-1,
        topic_states=tuple(
            UpdateMetadataTopicState(topic_name=n, topic_id=i, partition_states=tuple(s))
            for (n, i), s in topics.items()
        ),
        live_brokers=tuple(
            UpdateMetadataBroker(
                id=b,
                endpoints=(
                    UpdateMetadataEndpoint(port=9000 + b, host=f"h{b}", listener="internal"),
                    UpdateMetadataEndpoint(port=19000 + b, host=f"x{b}", listener="EXTERNAL"),
                ),
                rack="r1" if b == 1 else None,
            )
            for b in brokers
        ),
    )


def test_partitions_and_brokers_replace_what_was_there() -> None:
    image = apply_update_metadata(
        MetadataImage.empty("c"), _request({("t", "id1"): [_state(0, 1), _state(1, 2)]})
    )
    topic = image.topics.get_topic("t")
    assert topic is not None and topic.topic_id == "id1"
    assert topic.partitions[0].leader == 1 and topic.partitions[0].isr == (1, 2)
    assert sorted(image.cluster.brokers) == [1, 2]
    b1 = image.cluster.brokers[1]
    assert not b1.fenced and b1.rack == "r1"
    assert b1.endpoint("INTERNAL").port == 9001 and b1.endpoint("EXTERNAL").host == "x1"
    # An incremental update changes one partition and replaces the broker list.
    image = apply_update_metadata(image, _request({("t", "id1"): [_state(1, 1, 3)]}, (1,)))
    topic = image.topics.get_topic("t")
    assert topic.partitions[0].leader == 1
    assert (topic.partitions[1].leader, topic.partitions[1].leader_epoch) == (1, 3)
    assert sorted(image.cluster.brokers) == [1]
    assert image.cluster_id == "c"


def test_deleted_partitions_go_and_a_recreated_topic_replaces_the_old_one() -> None:
    image = apply_update_metadata(
        MetadataImage.empty(), _request({("t", "id1"): [_state(0, 1), _state(1, 2)]})
    )
    image = apply_update_metadata(
        image, _request({("t", "id1"): [_state(0, LEADER_DURING_DELETE)]})
    )
    assert sorted(image.topics.get_topic("t").partitions) == [1]
    image = apply_update_metadata(
        image, _request({("t", "id1"): [_state(1, LEADER_DURING_DELETE)]})
    )
    assert image.topics.get_topic("t") is None and not image.topics.by_id
    image = apply_update_metadata(image, _request({("t", "id1"): [_state(0, 1), _state(1, 2)]}))
    image = apply_update_metadata(image, _request({("t", "id2"): [_state(0, 2)]}))
    topic = image.topics.get_topic("t")
    assert topic.topic_id == "id2" and sorted(topic.partitions) == [0]
    assert list(image.topics.by_id) == ["id2"]


def test_topic_configs_are_set_and_removed() -> None:
    image = with_topic_configs(MetadataImage.empty(), "t", {"retention.ms": "1000"})
    assert dict(image.configs.topic_configs("t")) == {"retention.ms": "1000"}
    image = with_topic_configs(image, "t", {})
    assert dict(image.configs.topic_configs("t")) == {}


def test_a_users_scram_credentials_are_replaced_as_a_whole() -> None:
    one, two = (ScramCredential(b"s" * 12, bytes([i]) * 32, bytes([i]) * 32, 4096) for i in (1, 2))
    image = with_scram_credentials(MetadataImage.empty(), "alice", {1: one, 2: two})
    image = with_scram_credentials(image, "bob", {1: one})
    image = with_scram_credentials(image, "alice", {2: two})
    assert image.scram.users() == {"alice": {2: two}, "bob": {1: one}}
    image = with_scram_credentials(image, "bob", {})
    assert image.scram.users() == {"alice": {2: two}}
    assert 1 not in image.scram.mechanisms  # no empty mechanism left behind


def _acl(name: str, pattern: PatternType, op: AclOperation = AclOperation.READ) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, pattern, "User:alice", "*", op, AclPermissionType.ALLOW
    )


def test_a_resource_patterns_acls_are_replaced_as_a_whole_under_derived_ids() -> None:
    lit, pre = PatternType.LITERAL, PatternType.PREFIXED
    read, write = _acl("t", lit), _acl("t", lit, AclOperation.WRITE)
    prefixed = _acl("t", pre)  # the same name, another pattern: another resource
    image = with_resource_acls(MetadataImage.empty(), ResourceType.TOPIC, lit, "t", [read, write])
    image = with_resource_acls(image, ResourceType.TOPIC, pre, "t", [prefixed])
    assert dict(image.acls.by_id) == {acl_id(read): read, acl_id(write): write,
                                      acl_id(prefixed): prefixed}  # fmt: skip
    image = with_resource_acls(image, ResourceType.TOPIC, lit, "t", [write])
    assert dict(image.acls.by_id) == {acl_id(write): write, acl_id(prefixed): prefixed}
    image = with_resource_acls(image, ResourceType.TOPIC, pre, "t", [])
    assert dict(image.acls.by_id) == {acl_id(write): write}
    with pytest.raises(ValueError, match="is not an ACL of LITERAL TOPIC:u"):
        with_resource_acls(image, ResourceType.TOPIC, lit, "u", [write])
