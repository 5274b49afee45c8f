"""ACLs in ZK mode, on 3 real broker processes and a real ZooKeeper, stored as Kafka's ZK-mode
AclAuthorizer stores them: /kafka-acl/<ResourceType>/<name> (LITERAL) and
/kafka-acl-extended/prefixed/<ResourceType>/<name> (PREFIXED) hold {"version":1,"acls":[...]},
and every change leaves a /kafka-acl-changes (`TOPIC:orders`) or /kafka-acl-extended-changes
(JSON) notification, on which every broker reads the resource's znode again.

CreateAcls goes once through the Admin client (to the controller broker) and once to a broker
that forwards it: each is answered once the answering broker's image has the change, well
within request.timeout.ms. Every broker then describes the ACLs from its own image. One ACL is
deleted. The controller broker is killed: the new controller loaded the ACLs from ZooKeeper
(deleting one only ZooKeeper told it about matches it), and the killed broker, started again,
reads them all at start.
"""

from __future__ import annotations

import json

import trio

from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.messages.acls import (
    AclCreation,
    AclFilter,
    CreateAclsRequest,
    DescribeAclsRequest,
)
from tests.integration.cluster.conftest import ZkClusterFactory
from tests.support.cluster import ZkCluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient
from zkstore import ZkClient

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ_ORDERS = AclBinding(
    ResourceType.TOPIC, "orders", LIT, "User:alice", "*", AclOperation.READ, ALLOW
)
WRITE_ORDERS = AclBinding(
    ResourceType.TOPIC, "orders", LIT, "User:bob", "10.0.0.7", AclOperation.WRITE, DENY
)
ALTER_CLUSTER = AclBinding(
    ResourceType.CLUSTER, "kafka-cluster", LIT, "User:admin", "*", AclOperation.ALTER, ALLOW
)
TEAM_GROUPS = AclBinding(
    ResourceType.GROUP, "team-", PRE, "User:carol", "*", AclOperation.DESCRIBE, ALLOW
)
CHANGE_WITHIN_S = 10.0
"""An answer after request.timeout.ms (30 s) would mean the broker's wait for the change in its
image ran out instead of ending."""


async def described(cluster: ZkCluster, node_id: int) -> set[AclBinding]:
    """Broker `node_id`'s own answer: every ACL."""
    broker = cluster.brokers[node_id]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(DescribeAclsRequest(filter=AclFilter()))
    assert response.error_code == 0, response
    return {
        AclBinding(
            ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type),
            a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type),
        )
        for r in response.resources
        for a in r.acls
    }  # fmt: skip


async def wait_described(cluster: ZkCluster, brokers: list[int], wanted: set[AclBinding]) -> None:
    last: dict[int, set[AclBinding]] = {}

    async def everyone() -> bool:
        for node_id in brokers:
            last[node_id] = await described(cluster, node_id)
        return all(got == wanted for got in last.values())

    try:
        await wait_until(everyone, within=30, every=0.1)
    except trio.TooSlowError:
        raise AssertionError(f"wanted {wanted} on brokers {brokers}, got {last}") from None


async def forwarded_create(cluster: ZkCluster, via: int, acl: AclBinding) -> None:
    """Create `acl` through broker `via` (not the controller: it forwards)."""
    creation = AclCreation(
        resource_type=int(acl.resource_type), resource_name=acl.resource_name,
        resource_pattern_type=int(acl.pattern_type), principal=acl.principal, host=acl.host,
        operation=int(acl.operation), permission_type=int(acl.permission),
    )  # fmt: skip
    broker = cluster.brokers[via]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        with trio.fail_after(CHANGE_WITHIN_S):
            response = await wire.request(CreateAclsRequest(creations=(creation,)))
    assert [r.error_code for r in response.results] == [0], response


async def check_znodes(cluster: ZkCluster) -> None:
    """Kafka's layout, JSON and notifications."""
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        data, _ = await zk.get("/kafka-acl/Topic/orders")
        stored = json.loads(data)
        assert stored["version"] == 1
        assert sorted(stored["acls"], key=lambda a: a["principal"]) == [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"},
            {"principal": "User:bob", "permissionType": "Deny", "operation": "Write",
             "host": "10.0.0.7"},
        ]  # fmt: skip
        data, _ = await zk.get("/kafka-acl/Cluster/kafka-cluster")
        assert [a["operation"] for a in json.loads(data)["acls"]] == ["Alter"]
        data, _ = await zk.get("/kafka-acl-extended/prefixed/Group/team-")
        assert json.loads(data)["acls"] == [
            {"principal": "User:carol", "permissionType": "Allow", "operation": "Describe",
             "host": "*"}
        ]  # fmt: skip
        literal = [await _data(zk, "/kafka-acl-changes", n) for n in await _changes(zk, False)]
        assert sorted(literal) == [b"CLUSTER:kafka-cluster", b"TOPIC:orders"]
        extended = [await _data(zk, "/kafka-acl-extended-changes", n) for n in await _changes(zk)]
        assert [json.loads(e) for e in extended] == [
            {"version": 1, "resourceType": "GROUP", "name": "team-", "patternType": "PREFIXED"}
        ]


async def _changes(zk: ZkClient, extended: bool = True) -> list[str]:
    root = "/kafka-acl-extended-changes" if extended else "/kafka-acl-changes"
    names = sorted(await zk.get_children(root))
    assert all(n.startswith("acl_changes_") for n in names), names
    return names


async def _data(zk: ZkClient, root: str, name: str) -> bytes:
    data, _ = await zk.get(f"{root}/{name}")
    return bytes(data)


async def test_acls_live_in_zookeeper_and_survive_the_controller(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, {"auto.leader.rebalance.enable": False})
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    via = next(b for b in cluster.brokers if b != controller)
    everyone = sorted(cluster.brokers)
    created = {READ_ORDERS, WRITE_ORDERS, ALTER_CLUSTER, TEAM_GROUPS}

    async with cluster.admin() as admin:
        with trio.fail_after(CHANGE_WITHIN_S):
            await admin.create_acls([READ_ORDERS, WRITE_ORDERS, ALTER_CLUSTER])
    await forwarded_create(cluster, via, TEAM_GROUPS)
    assert await described(cluster, via) == created
    await wait_described(cluster, everyone, created)
    async with cluster.admin() as admin:
        assert set(await admin.describe_acls()) == created
    await check_znodes(cluster)

    bob = AclBindingFilter(resource_type=ResourceType.TOPIC, principal="User:bob")
    async with cluster.admin() as admin:
        with trio.fail_after(CHANGE_WITHIN_S):
            assert await admin.delete_acls([bob]) == [WRITE_ORDERS]
    left = created - {WRITE_ORDERS}
    await wait_described(cluster, everyone, left)

    # The controller dies; its successor loaded the ACLs from ZooKeeper: a filter matches one
    # that only ZooKeeper told it about (it would match nothing otherwise).
    await cluster.brokers[controller].akill()
    await cluster.wait_controller(lambda c: c != controller)
    survivors = [b for b in everyone if b != controller]
    await wait_described(cluster, survivors, left)
    team = AclBindingFilter(resource_type=ResourceType.GROUP, pattern_type=PRE)
    async with cluster.admin() as admin:
        with trio.fail_after(CHANGE_WITHIN_S):
            assert await admin.delete_acls([team]) == [TEAM_GROUPS]
    left -= {TEAM_GROUPS}
    await wait_described(cluster, survivors, left)
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        assert await zk.get_children("/kafka-acl-extended/prefixed/Group") == []
        assert await zk.get_children("/kafka-acl/Topic") == ["orders"]

    # The killed broker, started again, reads every ACL at start.
    await cluster.brokers[controller].astart(within=60)
    await wait_described(cluster, [controller], left)
