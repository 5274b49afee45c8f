"""Broker and Raft metrics of real processes move when they should (scraped over HTTP, parsed
with prometheus_client.parser):

- ZK mode: a leader's BytesInPerSec / MessagesInPerSec grow by exactly the batches' bytes and
  records produced, RequestsPerSec{Produce} and the Produce time histograms by the requests
  sent (RemoteTimeMs for acks=all), ErrorsPerSec by one UNKNOWN_TOPIC_OR_PARTITION; a
  follower's ReplicationBytesInPerSec and ConsumerLag; after a follower is SIGKILLed the
  leader's IsrShrinksPerSec grows and UnderReplicatedPartitions is 1, after it comes back
  IsrExpandsPerSec grows and UnderReplicatedPartitions is 0 again.
- Raft mode (dedicated controller processes serve /metrics): the active controller's
  LeaderElectionRateAndTimeMs count grows when a broker leading partitions is SIGKILLed (its
  session expires, FenceStaleBrokers re-elects), its Raft commit latency count is positive;
  once it is SIGKILLed the new active controller's leader changes and commit latency count grow,
  and the brokers' current_leader follows.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
)
from protocol.record_batch import Record, build_batch
from tests.integration.cluster.conftest import RaftClusterFactory, ZkClusterFactory
from tests.support.cluster import Cluster
from tests.support.metrics import Scrape, scrape
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

TOPIC = "metered"
BTM = "kafka_server_brokertopicmetrics_"
REQ = "kafka_network_requestmetrics_"
RM = "kafka_server_replicamanager_"
ELECTIONS = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
RAFT = "kafka_server_raftmetrics_"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


def metrics_port(cluster: Cluster, node_id: int) -> int:
    """From the process's "metrics serving" event (it asked for port 0)."""
    event = cluster.brokers[node_id].wait_for_event("metrics serving", timeout=10)
    return int(event["port"])


def produce(acks: int, batch: bytes, topic: str = TOPIC) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=10000,
        topics=(ProduceTopic(name=topic, partitions=(ProducePartition(index=0, records=batch),)),),
    )


def delta(after: Scrape, before: Scrape, name: str, **labels: str) -> float:
    return after.value(name, **labels) - (before.get(name, **labels) or 0.0)


async def test_zk_broker_metrics_move_with_produce_errors_and_isr_changes(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    # The leader shrinks a dead follower out of the ISR after replica.lag.time.max.ms (1 s),
    # well before ZooKeeper expires its session (10 s) and the controller would do it; the
    # fast fencing, which would take it out at once, is off (this is the leader's metric).
    cluster = zk_cluster_factory(
        3,
        {
            "trioka.metrics.port": 0,
            "replica.lag.time.max.ms": 1000,
            "broker.session.fast.fencing.enable": False,
        },
        session_timeout_ms=10000,
    )
    await cluster.wait_ready()
    ports = {i: metrics_port(cluster, i) for i in cluster.brokers}
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, 1, 3, {})
    info = await cluster.wait_partition(TOPIC, 0, lambda i: i.leader >= 0 and len(i.isr) == 3)
    leader = info.leader
    controller = await cluster.controller_id()
    # A follower that is not the controller: the shrink needs a live controller to commit.
    victim = min(set(cluster.brokers) - {leader, controller})

    batches = [
        build_batch([Record(value=f"v{n}-{i}".encode() * (n + 1)) for i in range(n + 1)])
        for n in range(5)
    ]
    before = await scrape(ports[leader])
    broker = cluster.brokers[leader]
    async with await WireClient.connect(broker.host, broker.port) as wire:
        for batch in batches:
            response = await wire.request(produce(-1, batch))
            assert isinstance(response, ProduceResponse)
            assert response.topics[0].partitions[0].error_code == 0
        missing = await wire.request(produce(1, batches[0], topic="absent"))
        code = missing.topics[0].partitions[0].error_code
        assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    after = await scrape(ports[leader])

    assert delta(after, before, BTM + "bytesin_total", topic=TOPIC) == sum(map(len, batches))
    assert delta(after, before, BTM + "messagesin_total", topic=TOPIC) == 15  # 1+2+3+4+5
    assert after.get(BTM + "bytesin_total", topic="absent") is None  # nothing appended
    assert delta(after, before, REQ + "requests_total", request="Produce") == 6
    for hist in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems"):
        assert delta(after, before, REQ + hist + "_count", request="Produce") == 6, hist
    # acks=all waited for the followers: time in the produce purgatory.
    assert delta(after, before, REQ + "remotetimems_sum", request="Produce") > 0
    unknown = delta(
        after,
        before,
        REQ + "errors_total",
        request="Produce",
        error="UNKNOWN_TOPIC_OR_PARTITION",
    )
    assert unknown == 1
    assert delta(after, before, REQ + "errors_total", request="Produce", error="NONE") == 5
    # Followers fetch from the leader: Fetch and FetchFollower, and bytes out to them.
    assert after.value(REQ + "requests_total", request="FetchFollower") > 0
    assert after.value(REQ + "requests_total", request="Fetch") >= after.value(
        REQ + "requests_total", request="FetchFollower"
    )
    assert after.value(BTM + "replicationbytesout_total") >= sum(map(len, batches))
    assert after.value(RM + "leadercount") >= 1
    assert after.value(RM + "underreplicatedpartitions") == 0
    assert (
        after.get(
            "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce"
        )
        is not None
    )

    # The follower copied every batch and caught up (its lag at its last fetch answer is 0).
    async def follower_caught_up() -> bool:
        scraped = await scrape(ports[victim])
        lag = scraped.get(
            "kafka_server_fetcherlagmetrics_consumerlag",
            clientId=f"ReplicaFetcherThread-0-{leader}",  # Kafka's name of the fetcher
            topic=TOPIC,
            partition="0",
        )
        copied = scraped.value(BTM + "replicationbytesin_total")
        return lag == 0 and copied >= sum(map(len, batches))

    await wait_until(follower_caught_up, within=30, every=0.2)

    shrinks = after.value(RM + "isrshrinks_total")
    expands = after.value(RM + "isrexpands_total")
    await cluster.brokers[victim].akill()
    # As Kafka's isCaughtUp, a follower at the leader's end offset stays in sync however long
    # it is silent: new records make the dead one fall behind.
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(produce(1, batches[0]))
        assert response.topics[0].partitions[0].error_code == 0

    async def shrunk() -> bool:
        scraped = await scrape(ports[leader])
        return (
            scraped.value(RM + "isrshrinks_total") > shrinks
            and scraped.value(RM + "underreplicatedpartitions") == 1
        )

    await wait_until(shrunk, within=30, every=0.2)
    assert (await scrape(ports[leader])).value(RM + "isrexpands_total") == expands

    await cluster.brokers[victim].arestart()

    async def expanded() -> bool:
        scraped = await scrape(ports[leader])
        return (
            scraped.value(RM + "isrexpands_total") > expands
            and scraped.value(RM + "underreplicatedpartitions") == 0
        )

    await wait_until(expanded, within=60, every=0.2)


async def test_raft_controller_metrics_move_with_a_broker_kill_and_a_controller_failover(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(
        3, {"trioka.metrics.port": 0}, controller_overrides={"trioka.metrics.port": 0}
    )
    await cluster.wait_ready()
    ctl_ports = {
        i: int(c.wait_for_event("metrics serving", timeout=10)["port"])
        for i, c in cluster.controllers.items()
    }
    broker_ports = {i: metrics_port(cluster, i) for i in cluster.brokers}
    active = await cluster.wait_active_controller()
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, 3, 3, {})
    for p in range(3):
        await cluster.wait_partition(TOPIC, p, lambda i: i.leader >= 0 and len(i.isr) == 3)

    before = await scrape(ctl_ports[active])
    assert before.value(ACTIVE) == 1
    assert before.value("kafka_controller_kafkacontroller_globalpartitioncount") >= 3
    assert before.value("kafka_controller_controllereventmanager_eventqueuetimems_count") > 0
    assert before.value(RAFT + "commit_latency_ms_count") > 0  # registrations, topic, no-ops
    assert before.value(RAFT + "current_leader") == active
    for other in set(cluster.controllers) - {active}:
        standby = await scrape(ctl_ports[other])
        assert standby.value(ACTIVE) == 0
        assert standby.value(RAFT + "current_leader") == active

    # A broker leading a partition dies: its session expires, the controller fences it and
    # elects new leaders (a BrokerChange: LeaderElectionRateAndTimeMs).
    victim = (await cluster.partition(TOPIC, 0)).leader
    await cluster.brokers[victim].akill()
    await cluster.wait_partition(TOPIC, 0, lambda i: i.leader not in (-1, victim))

    async def elected() -> bool:
        return (await scrape(ctl_ports[active])).value(ELECTIONS) > before.value(ELECTIONS)

    await wait_until(elected, within=30, every=0.2)

    # The active controller dies: a standby becomes leader (a leader change it counts) and
    # commits records of its own (commit latency observed there).
    standbys = {i: await scrape(ctl_ports[i]) for i in set(cluster.controllers) - {active}}
    await cluster.controllers[active].akill()
    successor = await cluster.wait_active_controller(lambda i: i != active)
    seen = standbys[successor]

    async def took_over() -> bool:
        now = await scrape(ctl_ports[successor])
        return (
            now.value(RAFT + "current_leader") == successor
            and now.value(RAFT + "leader_changes_total") > seen.value(RAFT + "leader_changes_total")
            and now.value(RAFT + "commit_latency_ms_count")
            > seen.value(RAFT + "commit_latency_ms_count")
            and now.value(ACTIVE) == 1
        )

    await wait_until(took_over, within=30, every=0.2)

    # Brokers follow the metadata log as observers: they see the new leader too.
    async def brokers_follow() -> bool:
        for i in set(cluster.brokers) - {victim}:
            if (await scrape(broker_ports[i])).value(RAFT + "current_leader") != successor:
                return False
        return True

    await wait_until(brokers_follow, within=30, every=0.2)
