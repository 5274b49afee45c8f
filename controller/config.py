"""The controller's own settings, with Kafka's names and defaults (protocol.server_configs)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from protocol.server_configs import SERVER_CONFIGS, static_topic_defaults


def _default(key: str) -> Any:
    return SERVER_CONFIGS[key].default


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    num_partitions: int = _default("num.partitions")
    """num.partitions: partitions of a topic created with num_partitions=-1."""
    default_replication_factor: int = _default("default.replication.factor")
    """default.replication.factor: replicas of a topic created with replication_factor=-1."""
    delete_topic_enable: bool = _default("delete.topic.enable")
    """delete.topic.enable: when false, DeleteTopics answers TOPIC_DELETION_DISABLED."""
    max_partitions_per_request: int = 10_000
    """Kafka's MAX_PARTITIONS_PER_BATCH: a CreateTopics asking for more partitions in total is
    refused with POLICY_VIOLATION (its records must fit in one metadata batch)."""
    auto_leader_rebalance_enable: bool = _default("auto.leader.rebalance.enable")
    """auto.leader.rebalance.enable: run the preferred-leader rebalance check periodically."""
    leader_imbalance_check_interval_seconds: int = _default(
        "leader.imbalance.check.interval.seconds"
    )
    """leader.imbalance.check.interval.seconds: how often the rebalance check runs."""
    leader_imbalance_per_broker_percentage: int = _default("leader.imbalance.per.broker.percentage")
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

    @classmethod
    def from_server_config(
        cls,
        values: Mapping[str, Any],
        explicit: Collection[str],
        *,
        max_partitions_per_request: int = 10_000,
    ) -> ControllerConfig:
        """From a resolved broker's or controller process's config (`values` has every key
        both accept; `explicit`: the keys set, whose `log.*` ones become topic_defaults)."""
        return cls(
            num_partitions=int(values["num.partitions"]),
            default_replication_factor=int(values["default.replication.factor"]),
            delete_topic_enable=bool(values["delete.topic.enable"]),
            max_partitions_per_request=max_partitions_per_request,
            auto_leader_rebalance_enable=bool(values["auto.leader.rebalance.enable"]),
            leader_imbalance_check_interval_seconds=int(
                values["leader.imbalance.check.interval.seconds"]
            ),
            leader_imbalance_per_broker_percentage=int(
                values["leader.imbalance.per.broker.percentage"]
            ),
            topic_defaults=static_topic_defaults(values, explicit),
        )
