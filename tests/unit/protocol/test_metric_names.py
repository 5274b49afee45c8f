"""protocol.metric_names: jmx_exporter's names of Kafka's MBeans under Strimzi's rules (the
names Strimzi's dashboards query), the one table every exporter and reader takes them from."""

from __future__ import annotations

import re

import pytest

from protocol import metric_names as names
from protocol.metric_names import (
    KAFKA_METRICS,
    controller_stats_name,
    prometheus_name,
    raft_metrics_name,
    request_metrics_name,
    socket_server_metrics_name,
)


def test_the_rule_is_strimzis() -> None:
    # A meter's Count: PerSec dropped, _total added (Strimzi: name=(.+)PerSec\w* -> ..._$3_total).
    assert (
        prometheus_name("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec")
        == "kafka_server_brokertopicmetrics_messagesin_total"
    )
    # A gauge's Value and a timer (its _count is jmx_exporter's): lower case, as it is.
    assert (
        prometheus_name("kafka.controller:type=KafkaController,name=ActiveControllerCount")
        == "kafka_controller_kafkacontroller_activecontrollercount"
    )
    assert request_metrics_name("TotalTimeMs") == "kafka_network_requestmetrics_totaltimems"
    assert request_metrics_name("RequestsPerSec") == "kafka_network_requestmetrics_requests_total"
    assert (
        controller_stats_name("LeaderElectionRateAndTimeMs")
        == "kafka_controller_controllerstats_leaderelectionrateandtimems"
    )
    # raft-metrics attributes: kafka_server_raftmetrics_$1, '-' made '_' (jmx_exporter's safe name).
    assert raft_metrics_name("current-leader") == "kafka_server_raftmetrics_current_leader"
    # A percent (Strimzi: name=(.+)Percent\w* -> ..._$3_percent, before the meter rules).
    assert (
        prometheus_name("kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent")
        == "kafka_network_socketserver_networkprocessoravgidle_percent"
    )
    # socket-server-metrics attributes: kafka_server_$1_$4 with '-' made '_'.
    assert (
        socket_server_metrics_name("connection-count")
        == "kafka_server_socket_server_metrics_connection_count"
    )
    with pytest.raises(ValueError, match="not a Kafka MBean"):
        prometheus_name("kafka.server:name=NoType")


def test_the_table_holds_the_names_strimzis_dashboards_query() -> None:
    # strimzi-kafka.json and strimzi-kraft.json (packaging/examples/metrics/grafana-dashboards).
    dashboards = {
        "kafka_server_brokertopicmetrics_messagesin_total",
        "kafka_server_brokertopicmetrics_bytesin_total",
        "kafka_server_brokertopicmetrics_bytesout_total",
        "kafka_server_brokertopicmetrics_totalproducerequests_total",
        "kafka_server_brokertopicmetrics_failedproducerequests_total",
        "kafka_server_brokertopicmetrics_totalfetchrequests_total",
        "kafka_server_brokertopicmetrics_failedfetchrequests_total",
        "kafka_network_socketserver_networkprocessoravgidle_percent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
        "kafka_server_socket_server_metrics_connection_count",
        "kafka_log_log_size",
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_server_replicamanager_leadercount",
        "kafka_server_replicamanager_partitioncount",
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_controller_controllerstats_uncleanleaderelections_total",
        "kafka_server_raftmetrics_current_state",
        "kafka_server_raftmetrics_current_leader",
        "kafka_server_raftmetrics_current_vote",
        "kafka_server_raftmetrics_current_epoch",
        "kafka_server_raftmetrics_high_watermark",
        "kafka_server_raftmetrics_log_end_offset",
        "kafka_server_raftmetrics_commit_latency_avg",
    }
    assert dashboards <= set(KAFKA_METRICS.values())
    valid = re.compile(r"kafka_[a-z0-9_]+")
    assert all(valid.fullmatch(n) for n in KAFKA_METRICS.values())
    assert len(set(KAFKA_METRICS.values())) == len(KAFKA_METRICS)
    assert names.KAFKA_METRICS["kafka.network:type=RequestMetrics,name=ErrorsPerSec"] == (
        "kafka_network_requestmetrics_errors_total"
    )
    # The Kafka Exporter's consumer group names (strimzi-kafka-exporter.json).
    assert names.CONSUMERGROUP_LAG == "kafka_consumergroup_lag"
