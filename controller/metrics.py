"""The controller's metrics, with Kafka's names, exported under the jmx_exporter names Kafka
dashboards read (protocol.metric_names: `ActiveControllerCount` is
`kafka_controller_kafkacontroller_activecontrollercount`, `LeaderElectionRateAndTimeMs` the
histogram `kafka_controller_controllerstats_leaderelectionrateandtimems`, whose `_count` is
jmx_exporter's).

- kafka.controller:type=ControllerEventManager: `EventQueueSize`, `EventQueueTimeMs`,
  `EventQueueProcessingTimeMs`.
- kafka.controller:type=ControllerStats: one rate-and-time timer per controller state that has
  one (Kafka's ControllerState.rateAndTimeMetricName: `<State>RateAndTimeMs`, except
  BrokerChange, whose timer kept its historical name `LeaderElectionRateAndTimeMs`), and
  `UncleanLeaderElectionsPerSec` (a counter: Prometheus derives the rate).
- kafka.controller:type=KafkaController gauges: `ActiveControllerCount`,
  `OfflinePartitionsCount`, `PreferredReplicaImbalanceCount`, `GlobalTopicCount`,
  `GlobalPartitionCount`, computed at scrape time from the image of the driver bound with
  `bind` (0 on a broker whose controller is not active, as Kafka's).

Which event feeds which timer is `ControllerStateName.for_request` (Kafka's
ControllerEvent.state): BrokerChange -> LeaderElectionRateAndTimeMs, ControlledShutdown ->
ControlledShutdownRateAndTimeMs, ElectLeaders -> ManualLeaderBalanceRateAndTimeMs, the
rebalance check -> AutoLeaderBalanceRateAndTimeMs, AlterPartition -> IsrChangeRateAndTimeMs,
CreateTopics / CreatePartitions -> TopicChangeRateAndTimeMs, DeleteTopics ->
TopicDeletionRateAndTimeMs, reassignments -> PartitionReassignmentRateAndTimeMs (Kafka's
AlterPartitionReassignment state keeps that name), ListPartitionReassignments ->
ListPartitionReassignmentRateAndTimeMs, IncrementalAlterConfigs of a topic's
unclean.leader.election.enable -> TopicUncleanLeaderElectionEnableRateAndTimeMs, a failover or
resignation -> ControllerChangeRateAndTimeMs (timed by the ZK driver, not an event here).

Metrics live in a prometheus_client registry; the default instance is created once per process
on the global registry (served on /metrics by deploy.telemetry.metrics_server), tests pass their own
registry. Every ControllerDriver without an explicit `metrics` shares that one instance: a ZK-mode
broker builds a new driver each time it is elected, and registering the same names again on one
registry would raise (duplicated timeseries), so terms reuse, never re-create, the metrics; a new
term `bind`s the gauges to its own driver.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection
from enum import Enum

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from controller.state_machines import Liveness, PartitionState, partition_state
from controller.unclean_enable import enables_unclean_election
from protocol.metadata.image import MetadataImage
from protocol.metric_names import (
    ACTIVE_CONTROLLER_COUNT,
    EVENT_QUEUE_PROCESSING_TIME,
    EVENT_QUEUE_SIZE,
    EVENT_QUEUE_TIME,
    GLOBAL_PARTITION_COUNT,
    GLOBAL_TOPIC_COUNT,
    OFFLINE_PARTITIONS_COUNT,
    PREFERRED_REPLICA_IMBALANCE_COUNT,
    UNCLEAN_LEADER_ELECTIONS,
    controller_stats_name,
)

_MS_BUCKETS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class ControllerStateName(Enum):
    """Kafka's ControllerState values that have a rate-and-time metric; the value is the
    metric's name (`rateAndTimeMetricName` + "Ms")."""

    CONTROLLER_CHANGE = "ControllerChangeRateAndTimeMs"
    BROKER_CHANGE = "LeaderElectionRateAndTimeMs"  # kept for compatibility, as Kafka's
    TOPIC_CHANGE = "TopicChangeRateAndTimeMs"
    TOPIC_DELETION = "TopicDeletionRateAndTimeMs"
    PARTITION_REASSIGNMENT = "PartitionReassignmentRateAndTimeMs"
    AUTO_LEADER_BALANCE = "AutoLeaderBalanceRateAndTimeMs"
    MANUAL_LEADER_BALANCE = "ManualLeaderBalanceRateAndTimeMs"
    CONTROLLED_SHUTDOWN = "ControlledShutdownRateAndTimeMs"
    ISR_CHANGE = "IsrChangeRateAndTimeMs"
    LEADER_AND_ISR_RESPONSE_RECEIVED = "LeaderAndIsrResponseReceivedRateAndTimeMs"
    LOG_DIR_CHANGE = "LogDirChangeRateAndTimeMs"
    CONTROLLER_SHUTDOWN = "ControllerShutdownRateAndTimeMs"
    UNCLEAN_LEADER_ELECTION_ENABLE = "UncleanLeaderElectionEnableRateAndTimeMs"
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = "TopicUncleanLeaderElectionEnableRateAndTimeMs"
    LIST_PARTITION_REASSIGNMENT = "ListPartitionReassignmentRateAndTimeMs"


_REQUEST_STATES: dict[str, ControllerStateName] = {
    "BrokerChange": ControllerStateName.BROKER_CHANGE,
    "ControlledShutdownRequest": ControllerStateName.CONTROLLED_SHUTDOWN,
    "ElectLeadersRequest": ControllerStateName.MANUAL_LEADER_BALANCE,
    "AutoLeaderRebalance": ControllerStateName.AUTO_LEADER_BALANCE,
    "AlterPartitionRequest": ControllerStateName.ISR_CHANGE,
    "CreateTopicsRequest": ControllerStateName.TOPIC_CHANGE,
    "CreatePartitionsRequest": ControllerStateName.TOPIC_CHANGE,
    "DeleteTopicsRequest": ControllerStateName.TOPIC_DELETION,
    "AlterPartitionReassignmentsRequest": ControllerStateName.PARTITION_REASSIGNMENT,
    "ListPartitionReassignmentsRequest": ControllerStateName.LIST_PARTITION_REASSIGNMENT,
    # Raft mode: registering, unregistering and fencing a broker change the live broker set
    # and re-elect its partitions, which ZK Kafka times as BrokerChange.
    "BrokerRegistrationRequest": ControllerStateName.BROKER_CHANGE,
    "UnregisterBrokerRequest": ControllerStateName.BROKER_CHANGE,
    "FenceStaleBrokers": ControllerStateName.BROKER_CHANGE,
    "FenceDeadBroker": ControllerStateName.BROKER_CHANGE,
}
"""Request type name -> Kafka's ControllerEvent.state. Requests not listed have no timer:
DescribeConfigs and IncrementalAlterConfigs (Kafka answers them outside the ZK controller's
queue; one that sets a topic's unclean.leader.election.enable is Kafka's
TopicUncleanLeaderElectionEnable event, `state_for_request`) and RegisterBroker (KRaft's broker registration, the
standalone mode's; ZK mode registers brokers by BrokerChange)."""


def state_for_request(request: object) -> ControllerStateName | None:
    if enables_unclean_election(request):
        return ControllerStateName.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
    if type(request).__name__ == "BrokerHeartbeatRequest":
        # Raft mode: a heartbeat asking to shut down is the controlled shutdown (KIP-631);
        # ordinary heartbeats (every 2 s per broker) have no timer, as Kafka's.
        if getattr(request, "want_shut_down", False):
            return ControllerStateName.CONTROLLED_SHUTDOWN
        return None
    return _REQUEST_STATES.get(type(request).__name__)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.event_queue_size = Gauge(
            EVENT_QUEUE_SIZE,
            "Events waiting in the controller's queue (EventQueueSize).",
            registry=registry,
        )
        self.event_queue_time_ms = Histogram(
            EVENT_QUEUE_TIME,
            "Time events waited in the controller's queue, ms (EventQueueTimeMs).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.event_queue_processing_time_ms = Histogram(
            EVENT_QUEUE_PROCESSING_TIME,
            "Time the controller took to process an event, including the wait for its records "
            "to commit, ms (EventQueueProcessingTimeMs).",
            buckets=_MS_BUCKETS,
            registry=registry,
        )
        self.rate_and_time_ms: dict[ControllerStateName, Histogram] = {
            state: Histogram(
                controller_stats_name(state.value),
                f"Time the controller took to process a {state.name} event, from its start to "
                f"the commit of its records, ms; the count gives the rate ({state.value}).",
                buckets=_MS_BUCKETS,
                registry=registry,
            )
            for state in ControllerStateName
        }
        self.leader_election_rate_and_time_ms = self.rate_and_time_ms[
            ControllerStateName.BROKER_CHANGE
        ]
        """BrokerChange events (LeaderElectionRateAndTimeMs, Kafka's name for them)."""
        self.unclean_leader_elections = Counter(
            UNCLEAN_LEADER_ELECTIONS,
            "Leaders elected out of the ISR (UncleanLeaderElectionsPerSec; the rate is "
            "Prometheus' rate() of this counter).",
            registry=registry,
        )
        self._lock = threading.Lock()
        self._image: Callable[[], MetadataImage] | None = None
        self._excluded: Callable[[], Collection[str]] = frozenset
        self._owner: object | None = None
        gauges = {
            ACTIVE_CONTROLLER_COUNT: (
                "1 on the active controller, else 0 (ActiveControllerCount).",
                lambda: 0 if self._bound() is None else 1,
            ),
            OFFLINE_PARTITIONS_COUNT: (
                "Partitions whose leader is not live, topics queued for deletion left out "
                "(OfflinePartitionsCount).",
                lambda: self._count(_offline),
            ),
            PREFERRED_REPLICA_IMBALANCE_COUNT: (
                "Partitions not led by their preferred replica, topics queued for deletion "
                "left out (PreferredReplicaImbalanceCount).",
                lambda: self._count(_imbalanced),
            ),
            GLOBAL_TOPIC_COUNT: (
                "Topics in the cluster (GlobalTopicCount).",
                lambda: self._count(lambda image, _: len(image.topics.by_id)),
            ),
            GLOBAL_PARTITION_COUNT: (
                "Partitions in the cluster, led or not (GlobalPartitionCount, as KRaft's).",
                lambda: self._count(
                    lambda image, _: sum(len(t.partitions) for t in image.topics.by_id.values())
                ),
            ),
        }
        self.gauges: dict[str, Gauge] = {}
        for name, (doc, fn) in gauges.items():
            gauge = Gauge(name, doc, registry=registry)
            gauge.set_function(fn)
            self.gauges[name] = gauge

    def timer(self, state: ControllerStateName) -> Histogram:
        return self.rate_and_time_ms[state]

    def bind(
        self,
        owner: object,
        image: Callable[[], MetadataImage],
        excluded_topic_ids: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """The KafkaController gauges read `image()` (at scrape time, from the metrics server's
        thread: images are immutable) until `unbind(owner)`; `excluded_topic_ids()` (topics
        queued for deletion) are left out of OfflinePartitionsCount and
        PreferredReplicaImbalanceCount, as Kafka's."""
        with self._lock:
            self._owner = owner
            self._image = image
            self._excluded = excluded_topic_ids or frozenset

    def set_excluded_topics(self, owner: object, excluded: Callable[[], Collection[str]]) -> None:
        with self._lock:
            if self._owner is owner:
                self._excluded = excluded

    def unbind(self, owner: object) -> None:
        """Gauges back to 0, unless another owner bound them since."""
        with self._lock:
            if self._owner is owner:
                self._owner = self._image = None
                self._excluded = frozenset

    def _bound(self) -> tuple[Callable[[], MetadataImage], Callable[[], Collection[str]]] | None:
        with self._lock:
            return None if self._image is None else (self._image, self._excluded)

    def _count(self, fn: Callable[[MetadataImage, Collection[str]], int]) -> int:
        bound = self._bound()
        if bound is None:
            return 0
        image_fn, excluded_fn = bound
        return fn(image_fn(), excluded_fn())


def _offline(image: MetadataImage, excluded: Collection[str]) -> int:
    """OfflinePartition state (New ones, never led, do not count), topics queued for deletion
    left out: Kafka's ControllerContext.offlinePartitionCount."""
    liveness = Liveness.from_image(image)
    return sum(
        1
        for topic_id, topic in image.topics.by_id.items()
        if topic_id not in excluded
        for part in topic.partitions.values()
        if partition_state(part, liveness) is PartitionState.OFFLINE
    )


def _imbalanced(image: MetadataImage, excluded: Collection[str]) -> int:
    return sum(
        1
        for topic_id, topic in image.topics.by_id.items()
        if topic_id not in excluded
        for part in topic.partitions.values()
        if part.replicas and part.leader != part.preferred_replica
    )


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_metrics() -> ControllerMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return ControllerMetrics()
