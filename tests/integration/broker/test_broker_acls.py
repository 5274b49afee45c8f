"""ACLs enforced by a real broker process (`authorizer.class.name` set): a super user manages
ACLs with CreateAcls/DescribeAcls/DeleteAcls and `trioka acl`; a user produces and consumes
in a group only where its ACLs allow, sees only the topics it may describe, and is refused
everything else with Kafka's authorization errors; removing an ACL takes the right away."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator

import pytest
import trio

from client import Consumer, KafkaError, Producer, TopicPartition
from client.admin import Admin
from client.connection import BrokerConnection, open_stream
from client.sasl import SaslCredentials, authenticate
from protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.produce import (
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
)
from tests.integration.broker.test_broker_sasl import sasl
from tests.integration.cli.test_cli_commands import trioka as trioka_bytes
from tests.support.broker_process import BrokerProcess
from tests.support.wire import batch

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
ADMIN = sasl("PLAIN", "admin", "admin-secret")
ALICE = sasl("PLAIN", "alice", "alice-secret")


def trioka(*args: str) -> subprocess.CompletedProcess[str]:
    done = trioka_bytes(*args)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def authorized_broker(broker_factory) -> tuple[BrokerProcess, str]:
    broker: BrokerProcess = broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.clients.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        }
    )
    (listening,) = [
        e for e in broker.events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "CLIENTS"
    ]  # fmt: skip
    return broker, f"127.0.0.1:{listening['port']}"


def acl(kind: ResourceType, name: str, op: AclOperation, principal: str = "User:alice",
        pattern: PatternType = PatternType.LITERAL) -> AclBinding:  # fmt: skip
    return AclBinding(kind, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


async def test_users_get_what_their_acls_allow(broker_factory) -> None:
    broker, address = authorized_broker(broker_factory)
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        for topic in ("orders", "secret"):
            await admin.create_topic(topic, 1, 1)
        await admin.create_acls([
            acl(ResourceType.TOPIC, "ord", AclOperation.WRITE, pattern=PatternType.PREFIXED),
            acl(ResourceType.TOPIC, "orders", AclOperation.READ),
            acl(ResourceType.GROUP, "g", AclOperation.READ),
        ])  # fmt: skip
        listed = await admin.describe_acls(AclBindingFilter(principal="User:alice"))
        assert len(listed) == 3
    async with Producer(bootstrap_servers=address, acks="all", max_block_ms=5000, **ALICE) as p:
        for i in range(5):
            await p.send_and_wait("orders", b"o%d" % i, partition=0)
        with pytest.raises(KafkaError) as refused:
            await p.send_and_wait("secret", b"x", partition=0)
    assert refused.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    got: list[bytes | None] = []
    async with Consumer(bootstrap_servers=address, group_id="g", auto_offset_reset="earliest",
                        **ALICE) as c:  # fmt: skip
        c.subscribe(["orders"])
        with trio.fail_after(30):
            while len(got) < 5:
                got += [r.value for r in await c.poll(200)]
        await c.commit()
    assert got == [b"o%d" % i for i in range(5)]
    async with Admin(bootstrap_servers=address, **ALICE) as admin:
        # Only the topics alice may describe are listed; the cluster's APIs are refused.
        assert await admin.list_topics() == ["orders"]
        with pytest.raises(KafkaError) as cluster:
            await admin.create_acls([acl(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALL)])
        assert cluster.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(KafkaError) as delete:
            await admin.delete_topics(["secret"])
        assert delete.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        removed = await admin.delete_acls(
            [AclBindingFilter(ResourceType.TOPIC, "ord", PatternType.PREFIXED)]
        )
        assert [a.operation for a in removed] == [AclOperation.WRITE]
    # No WRITE anywhere: no producer id either (KIP-679), then no write to the topic.
    async with Producer(bootstrap_servers=address, acks="all", **ALICE) as p:
        with pytest.raises(KafkaError) as no_id:
            await p.send_and_wait("orders", b"late", partition=0)
    assert no_id.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    async with Producer(bootstrap_servers=address, acks="all", enable_idempotence=False,
                        **ALICE) as p:  # fmt: skip
        with pytest.raises(KafkaError) as gone:
            await p.send_and_wait("orders", b"late", partition=0)
    assert gone.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert broker.running


def test_the_acl_cli_adds_lists_and_removes(broker_factory) -> None:
    broker, address = authorized_broker(broker_factory)
    creds = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
             "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret"]  # fmt: skip
    added = trioka("acl", "add", "--allow-principal", "User:bob", "--operation", "Read",
                   "--operation", "Describe", "--topic", "logs", "--group", "g",
                   "--resource-pattern-type", "prefixed", "-b", address, *creds)  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "Added 4 ACL(s)" in added.stderr
    listed = trioka("acl", "list", "--topic", "logs-eu", "--resource-pattern-type", "match",
                    "--json", "-b", address, *creds)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {(r["principal"], r["operation"], r["resource_name"]) for r in rows} == {
        ("User:bob", "READ", "logs"),
        ("User:bob", "DESCRIBE", "logs"),
    }
    removed = trioka("acl", "remove", "--principal", "User:bob", "--resource-pattern-type", "any",
                     "--force", "-b", address, *creds)  # fmt: skip
    assert removed.returncode == 0 and "Removed 4 ACL(s)" in removed.stderr, removed.stderr
    bad = trioka("acl", "add", "--allow-principal", "bob", "--operation", "Read", "--topic",
                 "t", "-b", address, *creds)  # fmt: skip
    assert bad.returncode != 0 and "principal" in bad.stderr and "Traceback" not in bad.stderr
    # Without the super user's credentials: refused.
    anonymous = trioka("acl", "list", "-b", broker.bootstrap)
    assert "Cluster authorization failed" in anonymous.stderr


async def test_revoking_read_stops_a_running_consumer(broker_factory) -> None:
    """Its incremental fetches name no topic, yet read the whole session: before, they went
    on after the ACL was gone."""
    _, address = authorized_broker(broker_factory)
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        await admin.create_topic("orders", 1, 1)
        await admin.create_acls([acl(ResourceType.TOPIC, "orders", AclOperation.READ)])
    async with Producer(bootstrap_servers=address, **ADMIN) as producer:
        await producer.send_and_wait("orders", b"before", partition=0)
    async with Consumer(bootstrap_servers=address, auto_offset_reset="earliest",
                        **ALICE) as consumer:  # fmt: skip
        consumer.assign([TopicPartition("orders", 0)])
        got: list[bytes | None] = []
        with trio.fail_after(20):
            while not got:
                got += [r.value for r in await consumer.poll(200)]
        async with Admin(bootstrap_servers=address, **ADMIN) as admin:
            await admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "orders")])
        with pytest.raises(KafkaError) as refused, trio.fail_after(20):
            while True:
                await consumer.poll(200)
    assert refused.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED


@contextlib.asynccontextmanager
async def connection_as(address: str, user: str, password: str) -> AsyncIterator[BrokerConnection]:
    """A raw connection, logged in with PLAIN: one request exactly as written."""
    host, port = address.rsplit(":", 1)
    conn = BrokerConnection(await open_stream(host, int(port), 10_000), address=address)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.reader)
        try:
            await authenticate(conn, SaslCredentials("PLAIN", user, password))
            yield conn
        finally:
            await conn.aclose()
            nursery.cancel_scope.cancel()


def latest(*topics: str) -> ListOffsetsRequest:
    return ListOffsetsRequest(topics=tuple(
        ListOffsetsTopic(name=t, partitions=(ListOffsetsPartition(index=0,
                                                                  timestamp=LATEST_TIMESTAMP),))
        for t in topics
    ))  # fmt: skip


async def test_multi_topic_requests_are_answered_per_topic(broker_factory) -> None:
    """Before, a Produce (ListOffsets, DeleteTopics) naming one topic alice may not use was
    refused whole; as Kafka, the topics she may use are served and the others refused."""
    _, address = authorized_broker(broker_factory)
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        for topic in ("a", "b"):
            await admin.create_topic(topic, 1, 1)
        await admin.create_acls([acl(ResourceType.TOPIC, "a", AclOperation.WRITE)])
    async with Producer(bootstrap_servers=address, acks="all", **ADMIN) as producer:
        for topic in ("a", "b"):  # one record each, once each partition has its leader
            await producer.send_and_wait(topic, b"first", partition=0)
    both = ProduceRequest(acks=-1, timeout_ms=10_000, topics=tuple(
        ProduceTopic(name=t, partitions=(ProducePartition(index=0, records=batch([b"x", b"y"])),))
        for t in ("a", "b")
    ))  # fmt: skip
    async with connection_as(address, "alice", "alice-secret") as alice:
        produced: ProduceResponse = await alice.request(both)
        assert produced.error_code == 0
        answers = [(t.name, ErrorCode(p.error_code), p.base_offset)
                   for t in produced.topics for p in t.partitions]  # fmt: skip
        assert answers == [
            ("a", ErrorCode.NONE, 1),
            ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1),
        ]
        assert produced.topics[1].partitions[0].error_message == (
            "Not authorized to access topics: [b]"
        )
        # WRITE implies DESCRIBE on a; nothing lets alice describe b.
        ends: ListOffsetsResponse = await alice.request(latest("b", "a"))
        found = [(t.name, ErrorCode(p.error_code), p.offset)
                 for t in ends.topics for p in t.partitions]  # fmt: skip
        assert found == [("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1), ("a", ErrorCode.NONE, 3)]
    async with connection_as(address, "admin", "admin-secret") as admin_conn:
        ends = await admin_conn.request(latest("b"))
        assert ends.topics[0].partitions[0].offset == 1  # b: only the admin's record
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        await admin.create_acls([acl(ResourceType.TOPIC, "b", AclOperation.DELETE)])
    async with Admin(bootstrap_servers=address, **ALICE) as admin:
        with pytest.raises(KafkaError) as refused:
            await admin.delete_topics(["a", "b"])  # one request: b deleted, a refused
        assert refused.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "[a]" in refused.value.message
    async with Admin(bootstrap_servers=address, **ADMIN) as admin:
        assert await admin.list_topics() == ["a"]
