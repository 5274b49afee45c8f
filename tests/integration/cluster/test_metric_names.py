"""/metrics of a real Raft controller process and a real broker process (scraped over HTTP)
speak the names Kafka dashboards read: jmx_exporter's under Strimzi's rules
(examples/metrics/kafka-metrics.yaml), as Strimzi's strimzi-kafka.json and strimzi-kraft.json
query them, and the Kafka Exporter's consumer group lag; no `_created` series; every `kafka_`
name lower case."""

from __future__ import annotations

import re

import trio
from prometheus_client.parser import text_string_to_metric_families

from client import Consumer, Producer, TopicPartition
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.support.metrics import Scrape, scrape
from tests.support.waiting import wait_until

TOPIC = "dashboards"

STRIMZI_KAFKA_BROKER = (
    # strimzi-kafka.json (the per-topic ones are asked with topic!="")
    'kafka_server_brokertopicmetrics_messagesin_total{topic="dashboards"}',
    'kafka_server_brokertopicmetrics_bytesin_total{topic="dashboards"}',
    'kafka_server_brokertopicmetrics_bytesout_total{topic="dashboards"}',
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_partitioncount",
    # the other ReplicaManager and broker series Kafka alerts use
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_atminisrpartitioncount",
    "kafka_server_replicamanager_isrshrinks_total",
    "kafka_server_replicamanager_isrexpands_total",
    "kafka_server_brokertopicmetrics_replicationbytesin_total",
    "kafka_server_brokertopicmetrics_replicationbytesout_total",
    'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"}',
    'kafka_network_requestmetrics_requests_total{request="Produce"}',
    'kafka_network_requestmetrics_errors_total{error="NONE",request="Produce"}',
    'kafka_network_requestmetrics_totaltimems_count{request="Produce"}',
    'kafka_network_requestmetrics_requestqueuetimems_count{request="Produce"}',
    # strimzi-kraft.json reads a broker's metadata follower too
    'kafka_server_raftmetrics_current_state{current_state="observer"}',
    "kafka_server_raftmetrics_current_leader",
    "kafka_server_raftmetrics_high_watermark",
    # the Kafka Exporter's (strimzi-kafka-exporter.json), from the group's coordinator
    'kafka_consumergroup_lag{consumergroup="viewers",partition="0",topic="dashboards"}',
    'kafka_consumergroup_current_offset{consumergroup="viewers",partition="0",topic="dashboards"}',
    'kafka_consumergroup_lag_sum{consumergroup="viewers",topic="dashboards"}',
    'kafka_consumergroup_lag_max{consumergroup="viewers"}',
)
STRIMZI_CONTROLLER = (
    # strimzi-kafka.json
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    # the other controller series
    "kafka_controller_kafkacontroller_globaltopiccount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
    "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
    "kafka_controller_controllereventmanager_eventqueuesize",
    "kafka_controller_controllereventmanager_eventqueuetimems_count",
    # strimzi-kraft.json
    'kafka_server_raftmetrics_current_state{current_state="leader"}',
    "kafka_server_raftmetrics_current_leader",
    "kafka_server_raftmetrics_current_vote",
    "kafka_server_raftmetrics_current_epoch",
    "kafka_server_raftmetrics_high_watermark",
    "kafka_server_raftmetrics_log_end_offset",
    "kafka_server_raftmetrics_commit_latency_avg",
    # a controller serves requests too
    'kafka_network_requestmetrics_requests_total{request="BrokerHeartbeat"}',
)
_SERIES = re.compile(r"(\w+)(?:\{(.*)\})?")


def series(scraped: Scrape) -> set[str]:
    """Every sample as `name{labels sorted}` (no braces without labels)."""
    out = set()
    for family in text_string_to_metric_families(scraped.text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out.add(f"{s.name}{{{labels}}}" if labels else s.name)
    return out


def names_of(scraped: Scrape) -> set[str]:
    """The metric names of every sample line and of every HELP and TYPE line."""
    names = set()
    for line in scraped.text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            match = _SERIES.match(line)
            assert match is not None, line
            names.add(match.group(1))
    return names


def check_convention(scraped: Scrape, what: str) -> None:
    assert "_created" not in scraped.text, f"{what} exports _created series"
    kafka = {n for n in names_of(scraped) if n.lower().startswith("kafka_")}
    assert kafka, what
    assert sorted(n for n in kafka if n != n.lower()) == [], what


async def test_a_broker_and_a_controller_speak_the_dashboards_names(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(
        1,
        {"trioka.metrics.port": 0, "group.initial.rebalance.delay.ms": 0},
        controllers=1,
        controller_overrides={"trioka.metrics.port": 0},
    )
    await cluster.wait_ready()
    (controller,) = cluster.controllers.values()
    (broker,) = cluster.brokers.values()
    ctl_port = int(controller.wait_for_event("metrics serving", timeout=10)["port"])
    broker_port = int(broker.wait_for_event("metrics serving", timeout=10)["port"])
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, 1, 1, {})
    await cluster.wait_partition(TOPIC, 0, lambda i: i.leader >= 0)
    async with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=0) as producer:
        for i in range(10):
            await producer.send(TOPIC, b"%d" % i, partition=0)
        await producer.flush()
    tp = TopicPartition(TOPIC, 0)
    settings = {"bootstrap.servers": cluster.bootstrap, "group.id": "viewers",
                "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    async with Consumer(settings) as consumer:  # commits 4 of 10, and nothing at close
        consumer.assign([tp])
        read: list = []
        while len(read) < 4:
            read += await consumer.poll(200)
        await consumer.commit({tp: 4})

    missing: list[set[str]] = []

    async def dashboards_names_present() -> bool:  # the follower's HW, the commit: soon
        missing.append(set(STRIMZI_KAFKA_BROKER) - series(await scrape(broker_port)))
        return not missing[-1]

    try:
        await wait_until(dashboards_names_present, within=30, every=0.2)
    except trio.TooSlowError:
        assert missing[-1] == set()
    on_broker = await scrape(broker_port)
    on_controller = await scrape(ctl_port)
    check_convention(on_broker, "the broker")
    check_convention(on_controller, "the controller")
    assert set(STRIMZI_CONTROLLER) - series(on_controller) == set()
    assert on_controller.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert on_broker.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 10
    lag = {"consumergroup": "viewers", "topic": TOPIC}
    assert on_broker.value("kafka_consumergroup_lag", **lag, partition="0") == 6
    assert on_broker.value("kafka_consumergroup_lag_max", consumergroup="viewers") == 6
