"""The controller's own settings, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    num_partitions: int = 1
    """num.partitions: partitions of a topic created with num_partitions=-1."""
    default_replication_factor: int = 1
    """default.replication.factor: replicas of a topic created with replication_factor=-1."""
    delete_topic_enable: bool = True
    """delete.topic.enable: when false, DeleteTopics answers TOPIC_DELETION_DISABLED."""
    max_partitions_per_request: int = 10_000
    """Kafka's MAX_PARTITIONS_PER_BATCH: a CreateTopics asking for more partitions in total is
    refused with POLICY_VIOLATION (its records must fit in one metadata batch)."""
    auto_leader_rebalance_enable: bool = True
    """auto.leader.rebalance.enable: run the preferred-leader rebalance check periodically."""
    leader_imbalance_check_interval_seconds: int = 300
    """leader.imbalance.check.interval.seconds: how often the rebalance check runs."""
    leader_imbalance_per_broker_percentage: int = 10
    """leader.imbalance.per.broker.percentage: a broker whose preferred partitions are led
    elsewhere above this share gets preferred elections for them."""
    topic_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Topic config defaults set in the broker's static config (log.retention.ms and friends,
    already mapped to their topic config names, e.g. {'retention.ms': '3600000'}); described
    with source STATIC_BROKER_CONFIG."""

    def __post_init__(self) -> None:
        if self.num_partitions <= 0:
            raise ValueError(f"num.partitions must be positive, got {self.num_partitions}")
        if self.default_replication_factor <= 0:
            raise ValueError(
                "default.replication.factor must be positive, got "
                f"{self.default_replication_factor}"
            )
