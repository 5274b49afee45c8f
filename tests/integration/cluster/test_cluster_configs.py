"""Topic configs changed in the cluster reach every broker, on 3 real broker processes: in ZK
mode through Kafka's `/config/topics/<t>` plus `/config/changes/config_change_<seq>`
notifications (read by deploy.node.broker_zk.ZkConfigSync) on a real ZooKeeper, in Raft mode
as ConfigRecords in the metadata log.

IncrementalAlterConfigs goes to a broker that is not the controller (it forwards it); then each
broker is asked on its own connection: DescribeConfigs, which every broker answers from its own
metadata image (broker.handlers.configs, not forwarded), and a Produce to the partition it
leads, which its own log refuses once max.message.bytes is lower than the batch. A broker that
was down while the config changed reads it at start.

Both modes (`cluster_factory`); only the way there differs and is checked per mode: ZK mode
through ZooKeeper (/config/topics znodes and /config/changes notifications read by
ZkConfigSync), Raft mode through ConfigRecords in the metadata log (the forwarded request
is the active controller's; every broker's metadata publisher logs applying the topic's
configs to its live logs, and no broker ever reads them from ZooKeeper).
"""

from __future__ import annotations

from collections.abc import Mapping

import trio

from client import NewTopic, TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    ResourceType,
)
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster, ZkCluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient, batch
from zkstore import ZkClient
from zkstore.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
)

TOPIC = "configured"
# Each broker leads one partition (the first replica is the preferred leader).
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
KEYS = ("retention.ms", "max.message.bytes")
NO_REBALANCE = {"auto.leader.rebalance.enable": False}


async def alter(cluster: Cluster, via: int, changes: Mapping[str, str]) -> None:
    """IncrementalAlterConfigs SET on TOPIC, sent on a connection to broker `via`."""
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=int(ResourceType.TOPIC),
                resource_name=TOPIC,
                configs=tuple(
                    AlterableConfig(name=k, config_operation=int(AlterConfigOp.SET), value=v)
                    for k, v in changes.items()
                ),
            ),
        )
    )
    broker = cluster.brokers[via]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(request)
    assert response.error_code == 0, response
    (result,) = response.responses
    assert result.error_code == 0, result


async def described(cluster: Cluster, node_id: int) -> dict[str, tuple[str | None, int]] | None:
    """Broker `node_id`'s own answer: {key: (value, config source)} for KEYS (None while it
    does not know the topic)."""
    broker = cluster.brokers[node_id]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(
                        resource_type=int(ResourceType.TOPIC),
                        resource_name=TOPIC,
                        configuration_keys=KEYS,
                    ),
                )
            )
        )
    (result,) = response.results
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return None  # UpdateMetadata with the new topic has not reached this broker yet
    assert result.error_code == 0, result
    return {e.name: (e.value, e.config_source) for e in result.configs}


async def produce_one(cluster: Cluster, node_id: int, partition: int, size: int) -> int:
    """acks=1 Produce of one record of `size` bytes to `partition`, sent to broker `node_id`
    (its leader); the partition's error code. NOT_LEADER_OR_FOLLOWER is asked again (bounded):
    Metadata from another broker may name the leader before the leader's own LeaderAndIsr."""
    broker = cluster.brokers[node_id]
    request = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=(
            ProduceTopic(
                name=TOPIC,
                partitions=(ProducePartition(index=partition, records=batch([b"x" * size])),),
            ),
        ),
    )
    async with await WireClient.connect(broker.host, broker.port) as wire:
        with trio.fail_after(15):
            while True:
                response = await wire.request(request)
                ((part,),) = (t.partitions for t in response.topics)
                if part.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    return int(part.error_code)
                await trio.sleep(0.1)


async def wait_all_show(
    cluster: Cluster, brokers: list[int], wanted: Mapping[str, str], within: float = 30
) -> None:
    """Until every broker in `brokers` answers DescribeConfigs with `wanted` as dynamic topic
    configs (empty `wanted`: every key at its default)."""
    expected = {k: (v, int(ConfigSource.DYNAMIC_TOPIC_CONFIG)) for k, v in wanted.items()}
    last: dict[int, object] = {}

    async def everyone() -> bool:
        for node_id in brokers:
            last[node_id] = got = await described(cluster, node_id)
            if got is None:
                return False
            if not wanted:  # every key at its default
                if {source for _, source in got.values()} != {int(ConfigSource.DEFAULT_CONFIG)}:
                    return False
            elif got != expected:
                return False
        return True

    try:
        await wait_until(everyone, within=within, every=0.1)
    except trio.TooSlowError as exc:
        raise AssertionError(f"wanted {expected} on every broker, last answers {last}") from exc


async def check_zk_path(cluster: ZkCluster, first: dict[str, str], second: dict[str, str]) -> None:
    """/config/topics/<t> holds the configs and each change left a numbered notification
    naming the topic; every broker logged reading the topic's configs from ZooKeeper
    (ZkConfigSync) rather than learning them some other way."""
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        data, _ = await zk.get(ConfigEntityZNode.path("topics", TOPIC))
        assert ConfigEntityZNode.decode(data) == second
        changes = await zk.get_children(ConfigEntityChangeNotificationZNode.PATH)
        named = [
            ConfigEntityChangeNotificationSequenceZNode.decode(
                (await zk.get(f"{ConfigEntityChangeNotificationZNode.PATH}/{c}"))[0]
            )
            for c in sorted(changes)
        ]
        assert named.count(f"topics/{TOPIC}") >= 2, named
    for node_id, broker in cluster.brokers.items():
        seen = [
            e["configs"]
            for e in broker.events()
            if e.get("event") == "topic config from zookeeper" and e.get("topic") == TOPIC
        ]
        assert seen[-2:] == [first, second], (node_id, seen)


def check_raft_path(cluster: Cluster) -> None:
    """Each broker's metadata publisher applied the topic's configs to its live logs once per
    change (from ConfigRecords: the image's configs changed), and none read ZooKeeper."""
    for node_id, broker in cluster.brokers.items():
        events = broker.events()
        applied = [
            e
            for e in events
            if e.get("event") == "applied topic config" and e.get("topic") == TOPIC
        ]
        assert len(applied) >= 2, (node_id, applied)
        assert not [e for e in events if e.get("event") == "topic config from zookeeper"]


async def test_topic_configs_reach_every_broker_and_a_restarted_one(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic(TOPIC, replica_assignment=ASSIGNMENT)])
    for p, replicas in ASSIGNMENT.items():
        await cluster.wait_partition(
            TOPIC, p, lambda i, r=replicas: i.leader == r[0] and len(i.isr) == 3
        )
    controller = await cluster.controller_id()
    via = next(b for b in cluster.brokers if b != controller)  # forwards to the controller
    everyone = sorted(cluster.brokers)
    leaders = {replicas[0]: p for p, replicas in ASSIGNMENT.items()}

    # Defaults first: nothing set, a 2 KB record is fine everywhere.
    await wait_all_show(cluster, everyone, {})
    for node_id, p in leaders.items():
        assert await produce_one(cluster, node_id, p, 2000) == 0

    first = {"retention.ms": "3600000", "max.message.bytes": "100000"}
    await alter(cluster, via, first)
    await wait_all_show(cluster, everyone, first)

    second = {"retention.ms": "7200000", "max.message.bytes": "1000"}
    await alter(cluster, via, second)
    await wait_all_show(cluster, everyone, second)
    # Applied by each leader's own log: a batch over max.message.bytes is refused.
    for node_id, p in leaders.items():
        assert await produce_one(cluster, node_id, p, 2000) == ErrorCode.MESSAGE_TOO_LARGE
        assert await produce_one(cluster, node_id, p, 100) == 0

    # The way there.
    if isinstance(cluster, ZkCluster):
        await check_zk_path(cluster, first, second)
    else:
        check_raft_path(cluster)

    # A broker down while the config changes reads it when it starts again.
    down = next(b for b in everyone if b not in (controller, via))
    await cluster.brokers[down].astop(within=60)
    await cluster.wait_ready(brokers=2)
    third = {"retention.ms": "10800000", "max.message.bytes": "500"}
    await alter(cluster, via, third)
    await wait_all_show(cluster, [controller, via], third)
    await cluster.brokers[down].astart(within=60)
    await wait_all_show(cluster, [down], third)
    await cluster.wait_partition(TOPIC, leaders[down], lambda i: down in i.isr, within=30)
    # Its replicas' logs have it too: once it leads again (preferred election), it refuses a
    # batch over the new limit that the second config allowed.
    async with cluster.admin() as admin:
        await admin.elect_leaders("preferred", [TopicPartition(TOPIC, leaders[down])])
    await cluster.wait_partition(TOPIC, leaders[down], lambda i: i.leader == down, within=30)
    assert await produce_one(cluster, down, leaders[down], 800) == ErrorCode.MESSAGE_TOO_LARGE
    assert await produce_one(cluster, down, leaders[down], 100) == 0
