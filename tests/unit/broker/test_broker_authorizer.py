"""broker.authorizer: Kafka's StandardAuthorizer decision as a table, and a rule for every
API key (a new API without one fails here)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.authorizer import API_RULES, INTER_BROKER_RULE_OPERATION, Authorizer
from protocol.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.messages import INTER_BROKER_APIS, ApiKey

T = ResourceType.TOPIC
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(
    name: str,
    op: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
    rtype: ResourceType = T,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


CASES = [
    # (id, acls, principal, host, operation, topic, allowed)
    ("no-acl-denied", [], "User:alice", "h", Op.READ, "orders", False),
    ("literal-allow", [acl("orders", Op.READ)], "User:alice", "h", Op.READ, "orders", True),
    ("other-topic", [acl("orders", Op.READ)], "User:alice", "h", Op.READ, "payments", False),
    ("other-principal", [acl("orders", Op.READ)], "User:bob", "h", Op.READ, "orders", False),
    ("wildcard-principal", [acl("orders", Op.READ, principal="User:*")], "User:bob", "h",
     Op.READ, "orders", True),
    ("wildcard-topic", [acl("*", Op.WRITE)], "User:alice", "h", Op.WRITE, "anything", True),
    ("prefixed", [acl("ord", Op.READ, pattern=PatternType.PREFIXED)], "User:alice", "h",
     Op.READ, "orders", True),
    ("prefixed-miss", [acl("ord", Op.READ, pattern=PatternType.PREFIXED)], "User:alice", "h",
     Op.READ, "payments", False),
    ("literal-is-not-prefix", [acl("ord", Op.READ)], "User:alice", "h", Op.READ, "orders", False),
    ("host-match", [acl("orders", Op.READ, host="10.0.0.1")], "User:alice", "10.0.0.1",
     Op.READ, "orders", True),
    ("host-miss", [acl("orders", Op.READ, host="10.0.0.1")], "User:alice", "10.0.0.2",
     Op.READ, "orders", False),
    ("deny-wins", [acl("orders", Op.ALL), acl("orders", Op.READ, DENY)], "User:alice", "h",
     Op.READ, "orders", False),
    ("deny-all-wins", [acl("*", Op.READ), acl("orders", Op.ALL, DENY, principal="User:*")],
     "User:alice", "h", Op.READ, "orders", False),
    ("deny-other-op", [acl("orders", Op.ALL), acl("orders", Op.WRITE, DENY)], "User:alice",
     "h", Op.READ, "orders", True),
    ("all-allows", [acl("orders", Op.ALL)], "User:alice", "h", Op.DELETE, "orders", True),
    ("read-implies-describe", [acl("orders", Op.READ)], "User:alice", "h", Op.DESCRIBE,
     "orders", True),
    ("write-implies-describe", [acl("orders", Op.WRITE)], "User:alice", "h", Op.DESCRIBE,
     "orders", True),
    ("describe-not-read", [acl("orders", Op.DESCRIBE)], "User:alice", "h", Op.READ, "orders",
     False),
    ("alter-configs-implies-describe-configs", [acl("orders", Op.ALTER_CONFIGS)], "User:alice",
     "h", Op.DESCRIBE_CONFIGS, "orders", True),
    ("deny-describe-is-not-deny-read", [acl("orders", Op.READ),
     acl("orders", Op.DESCRIBE, DENY)], "User:alice", "h", Op.READ, "orders", True),
    ("acl-for-someone-else-means-acls-exist", [acl("orders", Op.READ, principal="User:bob")],
     "User:alice", "h", Op.READ, "orders", False),
    ("group-acl-is-not-topic", [acl("orders", Op.READ, rtype=ResourceType.GROUP)],
     "User:alice", "h", Op.READ, "orders", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("acls", "principal", "host", "operation", "topic", "allowed"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decisions(
    acls: list[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    topic: str,
    allowed: bool,
) -> None:
    assert Authorizer.of(acls).authorize(principal, host, operation, T, topic) is allowed


def test_super_users_and_the_no_acl_default() -> None:
    deny_all = [acl("*", Op.ALL, DENY, principal="User:*")]
    admin = Authorizer.of(deny_all, super_users=["User:admin"])
    assert admin.authorize("User:admin", "h", Op.DELETE, T, "x")
    assert not admin.authorize("User:alice", "h", Op.READ, T, "x")
    open_ = Authorizer.of([], allow_everyone_if_no_acl_found=True)
    assert open_.authorize("User:ANONYMOUS", "h", Op.WRITE, T, "x")
    # ...but not where some ACL selects the resource.
    some = Authorizer.of([acl("x", Op.READ)], allow_everyone_if_no_acl_found=True)
    assert not some.authorize("User:ANONYMOUS", "h", Op.WRITE, T, "x")
    assert some.authorize("User:ANONYMOUS", "h", Op.WRITE, T, "y")


def test_every_api_has_an_authorization_rule() -> None:
    """A new API key must say what it is checked for (None only for what comes before
    authentication, ApiVersions and the SASL exchange, and for what Kafka lets anyone ask:
    DescribeCluster, and ListGroups, whose answer is trimmed instead)."""
    assert set(API_RULES) == set(ApiKey)
    assert {k for k, rule in API_RULES.items() if rule is None} == {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.LIST_GROUPS,
    }
    for key in INTER_BROKER_APIS:
        rule = API_RULES[key]
        assert rule is not None and rule.resource_type is ResourceType.CLUSTER, key
        assert rule.operation in INTER_BROKER_RULE_OPERATION, key


@given(
    acls=st.lists(
        st.builds(
            AclBinding,
            resource_type=st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
            resource_name=st.sampled_from(["a", "ab", "abc", "b", "*"]),
            pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
            principal=st.just("User:x"),
            host=st.just("*"),
            operation=st.just(AclOperation.READ),
            permission=st.just(AclPermissionType.ALLOW),
        ),
        max_size=12,
    ),
    kind=st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "c", "*"]),
)
def test_the_index_selects_what_a_scan_selects(acls, kind, name) -> None:
    """The per-resource index (one lookup per topic of a large Metadata answer) finds exactly
    the ACLs a scan of all of them would."""
    indexed = Authorizer.of(acls).selecting(kind, name)
    assert sorted(map(repr, indexed)) == sorted(repr(a) for a in acls if a.selects(kind, name))
