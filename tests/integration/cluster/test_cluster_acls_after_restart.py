"""A restarted Raft-mode broker authorizes only once it has caught up with the metadata log
(Kafka's enableRequestProcessing waits for the authorizer's initial load): an ACL deleted while
it was down never counts again, though the broker's own snapshot still holds it. The failpoint
`broker.metadata.hold_first_fetch` keeps the restarted broker on what it read from its disk
for 4 s; a client asking it meanwhile is answered only after the catch-up."""

from __future__ import annotations

import pytest
import trio

from client import KafkaError
from client.admin import Admin
from deploy.cluster.zookeeper import free_port
from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.errors import ErrorCode
from tests.integration.broker.test_broker_acls import JAAS
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.support.waiting import wait_until

ADMIN = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
         "sasl_username": "admin", "sasl_password": "admin-secret"}  # fmt: skip
ALICE = {**ADMIN, "sasl_username": "alice", "sasl_password": "alice-secret"}
SECURED = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT,"
    "CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.clients.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The brokers reach each other on PLAINTEXT: ANONYMOUS must be a super user there.
    "super.users": "User:admin;User:ANONYMOUS",
    # Snapshots: the restarted broker starts from one holding the ACL.
    "metadata.log.max.record.bytes.between.snapshots": 200,
}
DESCRIBE_T = AclBinding(
    ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*",
    AclOperation.DESCRIBE, AclPermissionType.ALLOW,
)  # fmt: skip


def clients_address(broker) -> str:
    (listening,) = [
        e for e in broker.events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "CLIENTS"
    ]  # fmt: skip
    return f"127.0.0.1:{listening['port']}"


async def describe_as_alice(address: str) -> None:
    async with Admin(bootstrap_servers=address, default_api_timeout_ms=20_000, **ALICE) as admin:
        await admin.describe_topics(["t"])


@pytest.mark.slow
async def test_an_acl_deleted_while_a_broker_was_down_never_counts_there(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    # Fixed ports: the restarted broker keeps its addresses (its registration names them).
    listeners = {
        n: {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()},CLIENTS://127.0.0.1:{free_port()}"}
        for n in (1, 2)
    }
    cluster = raft_cluster_factory(
        2, controllers=1, broker_overrides={n: {**SECURED, **listeners[n]} for n in (1, 2)}
    )
    first, second = cluster.brokers[1], cluster.brokers[2]
    async with Admin(bootstrap_servers=clients_address(first), **ADMIN) as admin:
        await admin.create_topic("t", 1, 2)
        await admin.create_acls([DESCRIBE_T])

    async def alice_sees_t() -> bool:
        try:
            await describe_as_alice(clients_address(second))
        except KafkaError:
            return False
        return True

    await wait_until(alice_sees_t, within=30, every=0.2)

    second.stop()
    async with Admin(bootstrap_servers=clients_address(first), **ADMIN) as admin:
        await admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "t", principal="User:alice")])
    with pytest.raises(KafkaError) as refused:
        await describe_as_alice(clients_address(first))
    assert refused.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    second.extra_env["TRIOKA_FAILPOINTS"] = "broker.metadata.hold_first_fetch=return(4)"
    before = len(second.events())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, second.start, 60.0)

        async def listening() -> bool:
            return any(
                e.get("event") == "broker listening" and e.get("listener") == "CLIENTS"
                for e in second.events()[before:]
            )

        await wait_until(listening, within=30, every=0.05)
        # Asked while the broker still holds its snapshot's ACLs: answered after catching up.
        with pytest.raises(KafkaError) as refused:
            await describe_as_alice(clients_address(second))
        assert refused.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
