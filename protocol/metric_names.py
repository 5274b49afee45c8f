"""The Prometheus names of trioka's Kafka metrics: what Kafka's JMX MBeans are called once the
Prometheus jmx_exporter has read them with Strimzi's rules, which is what Kafka users'
dashboards query (Strimzi's strimzi-kafka.json / strimzi-kraft.json, Confluent's
jmx-monitoring-stacks, most alerting rules written for Kafka).

Strimzi's rules (strimzi-kafka-operator, packaging/examples/metrics/kafka-metrics.yaml, with
`lowercaseOutputName: true`) name an MBean `kafka.<domain>:type=<Type>,name=<Name>[,k=v...]`:

- a meter (`<Name>` is `<Base>PerSec...`), its `Count`: `kafka_<domain>_<type>_<base>_total`
  (`MessagesInPerSec` -> `kafka_server_brokertopicmetrics_messagesin_total`), a Prometheus
  counter: Kafka's one-minute rate is `rate()` of it;
- a gauge, its `Value`: `kafka_<domain>_<type>_<name>`
  (`kafka_controller_kafkacontroller_activecontrollercount`, `kafka_log_log_size`);
- a `<Base>Percent...` gauge or meter (its `Value` / `MeanRate`):
  `kafka_<domain>_<type>_<base>_percent` (`NetworkProcessorAvgIdlePercent` ->
  `kafka_network_socketserver_networkprocessoravgidle_percent`), a fraction in [0, 1] despite
  the name (Strimzi's dashboard multiplies it by 100);
- a timer or histogram (`TotalTimeMs`, `LeaderElectionRateAndTimeMs`): `kafka_<domain>_<type>_<name>`
  with `_count`, and the Yammer percentiles as gauges with a `quantile` label. trioka's are
  Prometheus histograms under that same name: `_count` is jmx_exporter's, `_sum` and
  `_bucket{le}` replace the percentile gauges (use `histogram_quantile()`; buckets add up across
  brokers, percentiles do not). The two shapes cannot share one name, and the report
  (analytics/) computes its quantiles per window from the buckets.
- `kafka.server:type=raft-metrics`, attribute `<attr>`: `kafka_server_raftmetrics_<attr>`, `-`
  made `_` (`current-leader` -> `kafka_server_raftmetrics_current_leader`).
- `kafka.server:type=socket-server-metrics,listener=<L>,networkProcessor=<N>`, attribute
  `<attr>`: `kafka_server_socket_server_metrics_<attr>`, `-` made `_`
  (`connection-count` -> `kafka_server_socket_server_metrics_connection_count`).

The MBean's other keys are labels, named as Kafka names them (jmx_exporter does not lower-case
label names): `topic`, `partition`, `request`, `error`, `delayedOperation`, `clientId`,
`listener`.

Consumer group lag is no Kafka broker metric: the names are the Kafka Exporter's
(danielqsj/kafka_exporter, which Strimzi deploys and its strimzi-kafka-exporter.json reads):
`kafka_consumergroup_lag{consumergroup,topic,partition}`,
`kafka_consumergroup_current_offset{...}`, `kafka_consumergroup_lag_sum{consumergroup,topic}`,
plus Redpanda's per-group maximum as `kafka_consumergroup_lag_max{consumergroup}`.

`prometheus_name` is the one naming rule; every metric is registered under a name from here,
and every reader (analytics/, tests, benchmarks) takes its names from here too.
`KAFKA_METRICS` is the table MBean -> Prometheus name of the fixed ones; the per-API request
times and per-state controller timers come from `request_metrics_name` / `controller_stats_name`.
"""

from __future__ import annotations

import re
from contextvars import ContextVar

_MBEAN = re.compile(r"kafka\.(\w+):type=([^,]+),name=([^,]+)")
_METER = re.compile(r"(.+)PerSec\w*")  # Strimzi: name=(.+)PerSec\w* -> ..._$3_total
_PERCENT = re.compile(r"(.+)Percent\w*")  # Strimzi: name=(.+)Percent\w* -> ..._$3_percent
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")  # jmx_exporter's safeName: anything else becomes _


def prometheus_name(mbean: str) -> str:
    """The jmx_exporter name (Strimzi's rules) of `kafka.<domain>:type=<Type>,name=<Name>`:
    lower case, a meter's `PerSec` dropped and `_total` appended, a `Percent` cut to `_percent`
    (Strimzi's percent rules come before its meter rules)."""
    match = _MBEAN.fullmatch(mbean)
    if match is None:
        raise ValueError(f"not a Kafka MBean name kafka.<domain>:type=<T>,name=<N>: {mbean!r}")
    domain, type_, name = match.groups()
    suffix = ""
    if percent := _PERCENT.fullmatch(name):
        name, suffix = percent.group(1), "_percent"
    elif meter := _METER.fullmatch(name):
        name, suffix = meter.group(1), "_total"
    return _INVALID.sub("_", f"kafka_{domain}_{type_}_{name}").lower() + suffix


def raft_metrics_name(attribute: str) -> str:
    """KRaft's `kafka.server:type=raft-metrics` attribute (`current-leader`), as Strimzi's rule
    `kafka_server_raftmetrics_$1` and jmx_exporter's safe name make it."""
    return _INVALID.sub("_", f"kafka_server_raftmetrics_{attribute}").lower()


def socket_server_metrics_name(attribute: str) -> str:
    """`kafka.server:type=socket-server-metrics` attribute (`connection-count`), as Strimzi's rule
    `kafka_server_$1_$4` and jmx_exporter's safe name make it."""
    return _INVALID.sub("_", f"kafka_server_socket-server-metrics_{attribute}").lower()


def request_metrics_name(name: str) -> str:
    """`kafka.network:type=RequestMetrics,name=<name>` (`TotalTimeMs`, `RequestsPerSec`)."""
    return prometheus_name(f"kafka.network:type=RequestMetrics,name={name}")


def controller_stats_name(name: str) -> str:
    """`kafka.controller:type=ControllerStats,name=<name>` (`LeaderElectionRateAndTimeMs`)."""
    return prometheus_name(f"kafka.controller:type=ControllerStats,name={name}")


KAFKA_METRICS: dict[str, str] = {}
"""MBean (without its label keys) -> Prometheus name, every fixed-name metric trioka exports."""


def _kafka(mbean: str) -> str:
    name = KAFKA_METRICS[mbean] = prometheus_name(mbean)
    return name


def _raft(attribute: str) -> str:
    name = KAFKA_METRICS[f"kafka.server:type=raft-metrics,{attribute}"] = raft_metrics_name(
        attribute
    )
    return name


def _socket_server(attribute: str) -> str:
    name = KAFKA_METRICS[f"kafka.server:type=socket-server-metrics,{attribute}"] = (
        socket_server_metrics_name(attribute)
    )
    return name


# kafka.server:type=BrokerTopicMetrics (label topic, except the replication ones)
TOTAL_PRODUCE_REQUESTS = _kafka(
    "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec"
)
FAILED_PRODUCE_REQUESTS = _kafka(
    "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec"
)
TOTAL_FETCH_REQUESTS = _kafka("kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec")
FAILED_FETCH_REQUESTS = _kafka(
    "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec"
)
BYTES_IN = _kafka("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec")
MESSAGES_IN = _kafka("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec")
BYTES_OUT = _kafka("kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec")
REPLICATION_BYTES_IN = _kafka("kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec")
REPLICATION_BYTES_OUT = _kafka(
    "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec"
)

# kafka.server:type=ReplicaManager
UNDER_REPLICATED_PARTITIONS = _kafka(
    "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"
)
UNDER_MIN_ISR_PARTITION_COUNT = _kafka(
    "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"
)
AT_MIN_ISR_PARTITION_COUNT = _kafka("kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount")
LEADER_COUNT = _kafka("kafka.server:type=ReplicaManager,name=LeaderCount")
PARTITION_COUNT = _kafka("kafka.server:type=ReplicaManager,name=PartitionCount")
ISR_SHRINKS = _kafka("kafka.server:type=ReplicaManager,name=IsrShrinksPerSec")
ISR_EXPANDS = _kafka("kafka.server:type=ReplicaManager,name=IsrExpandsPerSec")

# kafka.log:type=Log (labels topic, partition)
LOG_SIZE = _kafka("kafka.log:type=Log,name=Size")
UNSHIPPED = frozenset({LOG_SIZE})
"""Families /metrics serves that telemetry does not ship: per-partition series no report reads
(25,000 samples, ~2 MB of JSON, per snapshot of a 25,000-partition broker)."""
shipping = ContextVar("trioka_metrics_shipping", default=False)
"""True while the telemetry shipper collects a snapshot (deploy.telemetry.snapshot): collectors
of UNSHIPPED families then yield nothing, instead of building samples on the event loop that
would be dropped."""

# The event loop: kafka.server:type=KafkaRequestHandlerPool, kafka.network:type=SocketServer
REQUEST_HANDLER_AVG_IDLE_PERCENT = _kafka(
    "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent"
)
NETWORK_PROCESSOR_AVG_IDLE_PERCENT = _kafka(
    "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent"
)

# kafka.server:type=socket-server-metrics (label listener)
CONNECTION_COUNT = _socket_server("connection-count")

# kafka.server:type=DelayedOperationPurgatory (label delayedOperation) and
# kafka.server:type=FetcherLagMetrics (labels clientId, topic, partition)
PURGATORY_SIZE = _kafka("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize")
FETCHER_CONSUMER_LAG = _kafka("kafka.server:type=FetcherLagMetrics,name=ConsumerLag")

# kafka.network:type=RequestMetrics (label request; errors also error)
REQUESTS = _kafka("kafka.network:type=RequestMetrics,name=RequestsPerSec")
ERRORS = _kafka("kafka.network:type=RequestMetrics,name=ErrorsPerSec")
REQUEST_TIMES = (
    "TotalTimeMs",
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
)
"""Kafka's split of a request's time, in the order it happens (histograms, ms)."""
REQUEST_TIME_NAMES = {
    t: _kafka(f"kafka.network:type=RequestMetrics,name={t}") for t in REQUEST_TIMES
}

# kafka.controller:type=ControllerEventManager, ControllerStats, KafkaController
EVENT_QUEUE_SIZE = _kafka("kafka.controller:type=ControllerEventManager,name=EventQueueSize")
EVENT_QUEUE_TIME = _kafka("kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs")
EVENT_QUEUE_PROCESSING_TIME = _kafka(
    "kafka.controller:type=ControllerEventManager,name=EventQueueProcessingTimeMs"
)
LEADER_ELECTION_RATE_AND_TIME = controller_stats_name("LeaderElectionRateAndTimeMs")
CONTROLLER_CHANGE_RATE_AND_TIME = controller_stats_name("ControllerChangeRateAndTimeMs")
AUTO_LEADER_BALANCE_RATE_AND_TIME = controller_stats_name("AutoLeaderBalanceRateAndTimeMs")
UNCLEAN_LEADER_ELECTIONS = _kafka(
    "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"
)
ACTIVE_CONTROLLER_COUNT = _kafka("kafka.controller:type=KafkaController,name=ActiveControllerCount")
OFFLINE_PARTITIONS_COUNT = _kafka(
    "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"
)
PREFERRED_REPLICA_IMBALANCE_COUNT = _kafka(
    "kafka.controller:type=KafkaController,name=PreferredReplicaImbalanceCount"
)
GLOBAL_TOPIC_COUNT = _kafka("kafka.controller:type=KafkaController,name=GlobalTopicCount")
GLOBAL_PARTITION_COUNT = _kafka("kafka.controller:type=KafkaController,name=GlobalPartitionCount")

# kafka.server:type=raft-metrics (KRaft's)
RAFT_CURRENT_STATE = _raft("current-state")
"""1, with the state as label `current_state` (Strimzi's rule for this attribute)."""
RAFT_CURRENT_LEADER = _raft("current-leader")
RAFT_CURRENT_VOTE = _raft("current-vote")
RAFT_CURRENT_EPOCH = _raft("current-epoch")
RAFT_HIGH_WATERMARK = _raft("high-watermark")
RAFT_LOG_END_OFFSET = _raft("log-end-offset")
RAFT_COMMIT_LATENCY_AVG = _raft("commit-latency-avg")
RAFT_COMMIT_LATENCY_MAX = _raft("commit-latency-max")
RAFT_COMMIT_LATENCY = raft_metrics_name("commit-latency-ms")
"""trioka's own: the histogram behind commit-latency-avg/max (KRaft has only those two)."""
RAFT_LEADER_CHANGES = raft_metrics_name("leader-changes-total")
"""trioka's own: new (epoch, leader) pairs this node learnt of (a counter)."""

# Consumer groups (the Kafka Exporter's names; the broker coordinating the group exports them)
CONSUMERGROUP_LAG = "kafka_consumergroup_lag"
CONSUMERGROUP_CURRENT_OFFSET = "kafka_consumergroup_current_offset"
CONSUMERGROUP_LAG_SUM = "kafka_consumergroup_lag_sum"
CONSUMERGROUP_LAG_MAX = "kafka_consumergroup_lag_max"
