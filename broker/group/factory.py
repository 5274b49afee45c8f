"""Building the group coordinator from the broker's config (used by broker.node)."""

from __future__ import annotations

from collections.abc import Callable

from broker.config import BrokerConfig
from broker.group.coordinator import GroupCoordinatorCore
from broker.group.driver import DriverConfig, GroupCoordinatorDriver
from broker.group.effects import GroupConfig
from broker.group.handlers import ClusterView, GroupApis, offsets_topic_spec
from broker.partitions import PartitionManager
from broker.ports import Failpoints
from broker.purgatory import FetchPurgatory
from protocol.names import TopicPartition


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        num_partitions=int(config["offsets.topic.num.partitions"]),
        min_session_timeout_ms=int(config["group.min.session.timeout.ms"]),
        max_session_timeout_ms=int(config["group.max.session.timeout.ms"]),
        initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
        max_size=int(config["group.max.size"]),
        offset_metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
        offsets_retention_ms=offsets_retention_ms(config),
    )


def offsets_retention_ms(config: BrokerConfig) -> int:
    override = int(config["trioka.offsets.retention.ms"])  # tests only
    return override if override >= 0 else int(config["offsets.retention.minutes"]) * 60_000


def make_group_coordinator(
    config: BrokerConfig,
    *,
    partitions: PartitionManager,
    notify: Callable[[TopicPartition], None],
    hw_purgatory: FetchPurgatory,
    cluster: ClusterView,
    client_id: Callable[[], str],
    failpoints: Failpoints | None = None,
) -> tuple[GroupCoordinatorDriver, GroupApis]:
    driver = GroupCoordinatorDriver(
        GroupCoordinatorCore(group_config(config)),
        partitions=partitions,
        notify=notify,
        hw_purgatory=hw_purgatory,
        config=DriverConfig(
            commit_timeout_ms=int(config["offsets.commit.timeout.ms"]),
            load_buffer_bytes=int(config["offsets.load.buffer.size"]),
            retention_check_interval_ms=int(config["offsets.retention.check.interval.ms"]),
            load_timeout_ms=int(config["request.timeout.ms"]),
        ),
        clock_ms=partitions.clock.wall_ms,
        failpoints=failpoints,
    )
    apis = GroupApis(
        driver,
        cluster,
        offsets_topic=offsets_topic_spec(
            partitions=int(config["offsets.topic.num.partitions"]),
            replication_factor=int(config["offsets.topic.replication.factor"]),
            segment_bytes=int(config["offsets.topic.segment.bytes"]),
        ),
        client_id=client_id,
    )
    return driver, apis
