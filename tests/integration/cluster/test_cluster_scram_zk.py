"""SCRAM credentials in ZK mode, on 3 real broker processes and a real ZooKeeper, stored as
Kafka stores them: /config/users/<URL-encoded user> holds {"version":1,"config":{
"SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,iterations=N"}} (salt and keys, never the
password), and every change leaves a `users/<user>` /config/changes notification.

AlterUserScramCredentials goes once through the Admin client (to the controller broker) and
once to a broker that forwards it: each is answered once the answering broker's image has the
change (read back from ZooKeeper on the notification), well within request.timeout.ms. Every
broker then describes the users from its own image. The controller broker is killed: the new
controller loaded the credentials from ZooKeeper (it can delete one), and the killed broker,
started again, reads them all at start.
"""

from __future__ import annotations

import json

import trio

from client import admin_users
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from protocol.scram import ScramCredential, ScramMechanism, credential_from_salted, salted_password
from tests.integration.cluster.conftest import ZkClusterFactory
from tests.support.cluster import ZkCluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient
from zkstore import ZkClient
from zkstore.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    UserScramCredentialsZNode,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ALICE_PASSWORD = "alice-correct-horse-battery"
BOB = "bob smith"  # a space: the znode name is "bob%20smith" (Kafka's Sanitizer)
BOB_PASSWORD = "bob-staple-and-more"
ALTER_WITHIN_S = 10.0
"""An answer after request.timeout.ms (30 s) would mean the broker's wait for the change in its
image ran out instead of ending."""

Described = dict[str, dict[int, int]]


async def described(cluster: ZkCluster, node_id: int) -> Described:
    """Broker `node_id`'s own answer: user -> {mechanism id: iterations}, every user."""
    broker = cluster.brokers[node_id]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(DescribeUserScramCredentialsRequest(users=None))
    assert response.error_code == 0, response
    return {
        r.user: {c.mechanism: c.iterations for c in r.credential_infos} for r in response.results
    }


async def wait_described(cluster: ZkCluster, brokers: list[int], wanted: Described) -> None:
    last: dict[int, Described] = {}

    async def everyone() -> bool:
        for node_id in brokers:
            last[node_id] = await described(cluster, node_id)
        return all(got == wanted for got in last.values())

    try:
        await wait_until(everyone, within=30, every=0.1)
    except trio.TooSlowError:
        raise AssertionError(f"wanted {wanted} on brokers {brokers}, got {last}") from None


async def forwarded_upsert(cluster: ZkCluster, via: int) -> None:
    """Bob's SHA-512 credential, sent to broker `via` (not the controller: it forwards)."""
    request = AlterUserScramCredentialsRequest(
        upsertions=(admin_users.upsertion(BOB, BOB_PASSWORD, SHA512, iterations=8192),)
    )
    broker = cluster.brokers[via]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        with trio.fail_after(ALTER_WITHIN_S):
            response = await wire.request(request)
    assert [(r.user, r.error_code) for r in response.results] == [(BOB, 0)], response


async def check_znodes(cluster: ZkCluster) -> None:
    """Kafka's layout and text form: keys that the password derives, not the password."""
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        assert sorted(await zk.get_children("/config/users")) == ["alice", "bob%20smith"]
        data, _ = await zk.get(UserScramCredentialsZNode.path("alice"))
        assert ALICE_PASSWORD.encode() not in data
        stored = json.loads(data)
        assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-256"]
        text = stored["config"]["SCRAM-SHA-256"]
        assert text.startswith("salt=") and text.endswith(",iterations=4096"), text
        credential = ScramCredential.from_text(text)
        salted = salted_password(SHA256, ALICE_PASSWORD, credential.salt, 4096)
        assert credential == credential_from_salted(SHA256, credential.salt, salted, 4096)
        data, _ = await zk.get("/config/users/bob%20smith")
        assert list(json.loads(data)["config"]) == ["SCRAM-SHA-512"]
        notified = []
        for name in sorted(await zk.get_children(ConfigEntityChangeNotificationZNode.PATH)):
            found, _ = await zk.get(f"{ConfigEntityChangeNotificationZNode.PATH}/{name}")
            notified.append(ConfigEntityChangeNotificationSequenceZNode.decode(found))
        users = [n for n in notified if n.startswith("users/")]
        assert users == ["users/alice", "users/bob%20smith"], notified


async def test_scram_credentials_live_in_zookeeper_and_survive_the_controller(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, {"auto.leader.rebalance.enable": False})
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    via = next(b for b in cluster.brokers if b != controller)
    everyone = sorted(cluster.brokers)

    async with cluster.admin() as admin:
        with trio.fail_after(ALTER_WITHIN_S):
            await admin.alter_user_scram_credentials(
                upsertions=[admin_users.upsertion("alice", ALICE_PASSWORD)]
            )
    await forwarded_upsert(cluster, via)
    assert await described(cluster, via) == {"alice": {SHA256: 4096}, BOB: {SHA512: 8192}}
    await wait_described(cluster, everyone, {"alice": {SHA256: 4096}, BOB: {SHA512: 8192}})
    await check_znodes(cluster)

    # The controller dies; its successor loaded the credentials from ZooKeeper: deleting one
    # that only ZooKeeper told it about succeeds (RESOURCE_NOT_FOUND otherwise).
    await cluster.brokers[controller].akill()
    await cluster.wait_controller(lambda c: c != controller)
    survivors = [b for b in everyone if b != controller]
    await wait_described(cluster, survivors, {"alice": {SHA256: 4096}, BOB: {SHA512: 8192}})
    async with cluster.admin() as admin:
        with trio.fail_after(ALTER_WITHIN_S):
            await admin.alter_user_scram_credentials(deletions=[("alice", SHA256)])
    await wait_described(cluster, survivors, {BOB: {SHA512: 8192}})
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        assert await zk.get_children("/config/users") == ["bob%20smith"]

    # The killed broker, started again, reads every user at start.
    await cluster.brokers[controller].astart(within=60)
    await wait_described(cluster, [controller], {BOB: {SHA512: 8192}})
