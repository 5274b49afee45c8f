"""Validation of a manual replica assignment, shared by CreateTopics, CreatePartitions and
reassignments (Kafka's ReplicationControlManager.validateManualPartitionAssignment)."""

from __future__ import annotations

from collections.abc import Sequence

from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError


def validate_manual_assignment(
    state: ControllerState, replicas: Sequence[int], replication_factor: int | None = None
) -> None:
    """INVALID_REPLICA_ASSIGNMENT for an empty list, an unregistered or repeated broker, or a
    replica count other than `replication_factor` (when given)."""
    if not replicas:
        raise _invalid("The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker_id in replicas:
        if not state.is_registered(broker_id):
            raise _invalid(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id in seen:
            raise _invalid(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        seen.add(broker_id)
    if replication_factor is not None and replication_factor != len(replicas):
        raise _invalid(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
