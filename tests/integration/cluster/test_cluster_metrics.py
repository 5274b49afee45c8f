"""`/metrics` of real ZK-mode broker processes (trioka.metrics.port, deploy.telemetry.metrics_server).

Every broker serves Prometheus' text format with the default process collectors and the
controller's metrics (Kafka's names); the active controller's
LeaderElectionRateAndTimeMs count (Kafka's timer of BrokerChange events) moves when a broker
leading a partition is SIGKILLed and the controller elects new leaders for its partitions, and
no other event type's timer moves for it; the KafkaController gauges (ActiveControllerCount,
GlobalTopicCount, GlobalPartitionCount, OfflinePartitionsCount) are the active controller's
view, zero elsewhere.

ZK mode only: the controller metrics under test live in the broker that is the ZK controller;
in Raft mode they belong to the controller processes.
"""

from __future__ import annotations

import re
import urllib.request

import trio

from tests.integration.cluster.conftest import ZkClusterFactory
from tests.support.cluster import ZkCluster
from tests.support.waiting import wait_until

ELECTIONS = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
QUEUE_SIZE = "kafka_controller_controllereventmanager_eventqueuesize"
QUEUE_TIME = "kafka_controller_controllereventmanager_eventqueuetimems_count"
STATS = "kafka_controller_controllerstats_"
GAUGES = "kafka_controller_kafkacontroller_"


def metrics_port(cluster: ZkCluster, node_id: int) -> int:
    """The port from the broker's "metrics serving" log event (it asked for port 0)."""
    event = cluster.brokers[node_id].wait_for_event("metrics serving", timeout=10)
    assert event["host"] == "127.0.0.1"
    return int(event["port"])


def _scrape_blocking(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text: str = response.read().decode()
        return text


async def scrape(port: int) -> str:
    return await trio.to_thread.run_sync(_scrape_blocking, port)


def sample(text: str, name: str) -> float:
    """The value of the unlabelled sample `name` in Prometheus' text format."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"no sample {name} in:\n{text[:2000]}"
    return float(match.group(1))


async def test_every_broker_serves_metrics_and_elections_move_the_controllers_count(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, {"trioka.metrics.port": 0})
    await cluster.wait_ready()
    ports = {i: metrics_port(cluster, i) for i in cluster.brokers}
    assert len(set(ports.values())) == 3

    # Every broker: the default process collectors and the controller's metrics (at zero on
    # brokers that are not the controller: created at start, not at election).
    for port in ports.values():
        text = await scrape(port)
        assert sample(text, "process_cpu_seconds_total") > 0
        assert sample(text, QUEUE_SIZE) >= 0
        sample(text, ELECTIONS)

    async with cluster.admin() as admin:
        await admin.create_topic("elections", 6, 3, {})
    for p in range(6):
        await cluster.wait_partition("elections", p, lambda i: i.leader >= 0 and len(i.isr) == 3)
    controller = await cluster.controller_id()
    leaders = {(await cluster.partition("elections", p)).leader for p in range(6)}
    # Striped placement spreads 6 leaders over 3 brokers: one that is not the controller leads.
    victim = min(leaders - {controller})
    led = [p for p in range(6) if (await cluster.partition("elections", p)).leader == victim]

    before_text = await scrape(ports[controller])
    before = sample(before_text, ELECTIONS)
    assert sample(before_text, QUEUE_TIME) > 0  # the controller has processed events
    assert sample(before_text, STATS + "controllerchangerateandtimems_count") >= 1
    assert sample(before_text, STATS + "topicchangerateandtimems_count") >= 1  # CreateTopics
    assert sample(before_text, GAUGES + "activecontrollercount") == 1
    assert sample(before_text, GAUGES + "globaltopiccount") == 1
    assert sample(before_text, GAUGES + "globalpartitioncount") == 6
    others_before = {
        name: sample(before_text, STATS + name.lower() + "_count")
        # (not AutoLeaderBalance: the periodic check may run meanwhile, it did count as an
        # election before event types had their own timers)
        for name in (
            "ControlledShutdownRateAndTimeMs",
            "ManualLeaderBalanceRateAndTimeMs",
            "TopicDeletionRateAndTimeMs",
        )
    }

    await cluster.brokers[victim].akill()
    for p in led:
        await cluster.wait_partition("elections", p, lambda i: i.leader not in (-1, victim))

    async def elections_counted() -> bool:
        return sample(await scrape(ports[controller]), ELECTIONS) > before

    await wait_until(elections_counted, within=30, every=0.1)
    after_text = await scrape(ports[controller])
    # A broker kill is a BrokerChange: no other event type's timer counted it.
    for name, value in others_before.items():
        assert sample(after_text, STATS + name.lower() + "_count") == value, name
    assert sample(after_text, GAUGES + "offlinepartitionscount") == 0
    # The other survivor serves metrics too: its controller is not active, so its counts did
    # not move and its KafkaController gauges are 0.
    other = ({1, 2, 3} - {controller, victim}).pop()
    other_text = await scrape(ports[other])
    assert sample(other_text, ELECTIONS) == 0
    assert sample(other_text, GAUGES + "activecontrollercount") == 0
    assert sample(other_text, GAUGES + "globalpartitioncount") == 0
