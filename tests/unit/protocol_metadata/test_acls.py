"""protocol.metadata.acls and protocol.acls' filters: CreateAcls and DeleteAcls as records
(Kafka's AclControlManager rules), DescribeAcls from an image, and AclBindingFilter's ANY /
MATCH / LITERAL / PREFIXED semantics."""

from __future__ import annotations

import itertools

import pytest

from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.codec import decode_request, encode_request
from protocol.errors import ErrorCode
from protocol.messages.acls import (
    AclCreation,
    AclFilter,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from protocol.metadata.acls import acl_id, create_acls, delete_acls, describe_acls
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import AclsImage, MetadataImage
from protocol.metadata.snapshot import encode_snapshot, image_from_snapshot
from protocol.metadata.topic_ids import is_uuid

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE = AclOperation.READ, AclOperation.WRITE


def creation(kind=T, name="orders", pattern=LIT, principal="User:alice", host="*", op=READ,
             permission=ALLOW) -> AclCreation:  # fmt: skip
    return AclCreation(
        resource_type=int(kind), resource_name=name, resource_pattern_type=int(pattern),
        principal=principal, host=host, operation=int(op), permission_type=int(permission),
    )  # fmt: skip


def apply(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply()


def with_acls(*creations: AclCreation) -> MetadataImage:
    ids = (f"id-{i}" for i in itertools.count())
    records, _ = create_acls(AclsImage(), CreateAclsRequest(creations=creations), ids.__next__)
    return apply(MetadataImage.empty(), records)


def test_create_validates_each_acl_and_stores_each_once() -> None:
    ids = iter(["a", "b", "c"])
    records, response = create_acls(
        AclsImage(),
        CreateAclsRequest(
            creations=(
                creation(),
                creation(),  # the same again: stored once
                creation(kind=ResourceType.ANY),
                creation(pattern=PatternType.MATCH),
                creation(op=AclOperation.ANY),
                creation(principal="alice"),
                creation(kind=C, name="other"),
                creation(host=""),
                creation(op=99),
                creation(kind=G, name="g", pattern=PRE, permission=DENY, op=AclOperation.ALL),
            )
        ),
        ids.__next__,
    )
    codes = [ErrorCode(r.error_code) for r in response.results]
    assert codes == [ErrorCode.NONE, ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * 7 + [
        ErrorCode.NONE
    ]
    assert "principal" in response.results[5].error_message
    assert "kafka-cluster" in response.results[6].error_message
    assert [r.id for r in records] == ["a", "b"]
    again, response = create_acls(
        apply(MetadataImage.empty(), records).acls,
        CreateAclsRequest(creations=(creation(),)),
        ids.__next__,
    )
    assert again == [] and response.results[0].error_code == 0


def test_filters() -> None:
    exact = AclBinding(T, "orders", LIT, "User:alice", "*", READ, ALLOW)
    wild = AclBinding(T, "*", LIT, "User:bob", "*", WRITE, ALLOW)
    prefix = AclBinding(T, "ord", PRE, "User:carol", "10.0.0.1", READ, DENY)
    acls = [exact, wild, prefix]

    def picked(f: AclBindingFilter) -> list[AclBinding]:
        return [a for a in acls if f.matches(a)]

    assert picked(AclBindingFilter()) == acls
    assert picked(AclBindingFilter(T, "orders", PatternType.MATCH)) == acls
    assert picked(AclBindingFilter(T, "other", PatternType.MATCH)) == [wild]
    assert picked(AclBindingFilter(T, "orders", PatternType.ANY)) == [exact]
    assert picked(AclBindingFilter(T, "ord", PRE)) == [prefix]
    assert picked(AclBindingFilter(G)) == []
    assert picked(AclBindingFilter(principal="User:bob")) == [wild]
    assert picked(AclBindingFilter(host="10.0.0.1", permission=DENY)) == [prefix]
    assert picked(AclBindingFilter(operation=WRITE)) == [wild]


def test_delete_and_describe() -> None:
    image = with_acls(
        creation(),
        creation(principal="User:bob", op=WRITE),
        creation(kind=G, name="g"),
    )
    described = describe_acls(image.acls, DescribeAclsRequest())
    assert [(r.resource_type, r.resource_name, [a.principal for a in r.acls])
            for r in described.resources] == [
        (int(T), "orders", ["User:alice", "User:bob"]), (int(G), "g", ["User:alice"])
    ]  # fmt: skip
    records, response = delete_acls(
        image.acls,
        DeleteAclsRequest(
            filters=(
                AclFilter(resource_type_filter=int(T), principal_filter="User:bob"),
                AclFilter(resource_type_filter=int(T)),  # bob's is not deleted twice
                AclFilter(operation=int(AclOperation.UNKNOWN)),
            )
        ),
    )
    assert [len(r.matching_acls) for r in response.filter_results] == [1, 1, 0]
    assert response.filter_results[2].error_code == ErrorCode.INVALID_REQUEST
    after = apply(image, records)
    assert [a.resource_type for a in after.acls.bindings()] == [G]


def test_acls_survive_a_snapshot_and_the_wire() -> None:
    image = with_acls(creation(), creation(kind=C, name="kafka-cluster", op=AclOperation.ALTER))
    rebuilt = image_from_snapshot(encode_snapshot(image), end_offset=5, epoch=1)
    assert rebuilt.acls == image.acls
    request = DescribeAclsRequest(filter=AclFilter(resource_name_filter="x"))
    assert decode_request(encode_request(7, "c", request)[4:]).body == request


def test_removing_an_unknown_acl_is_an_inconsistent_log() -> None:
    from protocol.metadata.image import MetadataReplayError
    from protocol.metadata.records import RemoveAccessControlEntryRecord

    with pytest.raises(MetadataReplayError, match="unknown ACL"):
        apply(MetadataImage.empty(), [RemoveAccessControlEntryRecord(id="nope")])


def test_an_acls_derived_id_is_a_uuid_of_all_its_values() -> None:
    acl = AclBinding(T, "orders", LIT, "User:alice", "*", READ, ALLOW)
    assert acl_id(acl) == acl_id(AclBinding(T, "orders", LIT, "User:alice", "*", READ, ALLOW))
    assert is_uuid(acl_id(acl))
    others = [
        AclBinding(G, "orders", LIT, "User:alice", "*", READ, ALLOW),
        AclBinding(T, "orders2", LIT, "User:alice", "*", READ, ALLOW),
        AclBinding(T, "orders", PRE, "User:alice", "*", READ, ALLOW),
        AclBinding(T, "orders", LIT, "User:bob", "*", READ, ALLOW),
        AclBinding(T, "orders", LIT, "User:alice", "10.0.0.1", READ, ALLOW),
        AclBinding(T, "orders", LIT, "User:alice", "*", WRITE, ALLOW),
        AclBinding(T, "orders", LIT, "User:alice", "*", READ, DENY),
    ]
    assert len({acl_id(a) for a in [acl, *others]}) == 8
