"""CreatePartitions: grow a topic, as Kafka's ReplicationControlManager.createPartitions.

Per topic, in order: a name given twice (INVALID_REQUEST), an unknown topic
(UNKNOWN_TOPIC_OR_PARTITION), a count that does not grow (INVALID_PARTITIONS), manual
assignments that are not one per new partition, have another replication factor than the topic,
name unregistered brokers or a broker twice, or only fenced brokers (INVALID_REPLICA_ASSIGNMENT);
otherwise the new partitions are placed as for a new topic (striped, rack-aware), continuing the
stripe from the existing partitions as Kafka's addPartitions does. validate_only writes nothing.
"""

from __future__ import annotations

from collections import Counter

from controller.assignment import validate_manual_assignment
from controller.context import ControllerContext
from controller.election import new_partition_leadership
from controller.placement import assign_replicas
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import Liveness, StateChangeLog
from controller.topics import new_partition_states
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import MetadataRecord


def _manual(
    state: ControllerState, request: CreatePartitionsTopic, rf: int, additional: int
) -> list[tuple[int, ...]]:
    assignments = request.assignments or ()
    if len(assignments) != additional:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    result = []
    for assignment in assignments:
        replicas = assignment.broker_ids
        validate_manual_assignment(state, replicas, rf)
        if not any(state.is_usable(r) for r in replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment {list(replicas)} "
                "are fenced or in controlled shutdown.",
            )
        result.append(tuple(replicas))
    return result


def _new_partitions(
    state: ControllerState, request: CreatePartitionsTopic, ctx: ControllerContext
) -> tuple[str, list[tuple[int, PartitionRegistration]]]:
    topic = state.topic(request.name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic {request.name!r}.")
    current = len(topic.partitions)
    if request.count < current:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {request.name} currently has {current} partition(s); {request.count} "
            "would not be an increase.",
        )
    if request.count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    additional = request.count - current
    if additional > ctx.config.max_partitions_per_request:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Excessively large number of partitions per request: {additional} requested, at "
            f"most {ctx.config.max_partitions_per_request} allowed.",
        )
    first = topic.partitions[min(topic.partitions)]
    rf = len(first.replicas)
    if request.assignments is not None:
        placement = _manual(state, request, rf, additional)
    else:
        brokers = state.usable_brokers()
        ids = sorted(brokers)
        # Kafka's addPartitions continues the stripe of partition 0.
        start = next((i for i, b in enumerate(ids) if b >= first.preferred_replica), -1)
        if any(rack is not None for rack in brokers.values()):
            start = -1  # the rack-alternated list has another order: start at random
        placement = assign_replicas(
            brokers, additional, rf, ctx.rng, fixed_start_index=start, start_partition_id=current
        )
    parts = []
    for i, replicas in enumerate(placement):
        leadership = new_partition_leadership(replicas, state.is_usable)
        parts.append(
            (
                current + i,
                PartitionRegistration(
                    replicas=replicas, isr=leadership.isr, leader=leadership.leader
                ),
            )
        )
    return topic.topic_id, parts


def create_partitions(
    state: ControllerState, request: CreatePartitionsRequest, ctx: ControllerContext
) -> ControllerResult[CreatePartitionsResponse]:
    counts = Counter(t.name for t in request.topics)
    records: list[MetadataRecord] = []
    sm = StateChangeLog()
    liveness = Liveness.from_image(state.image)
    results = []
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Duplicate topic name {topic.name!r} in the request.",
                )
            topic_id, parts = _new_partitions(state, topic, ctx)
            if not request.validate_only:
                records.extend(p.to_record(topic_id, pid) for pid, p in parts)
                new_partition_states(sm, topic.name, parts, liveness)
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=0))
        except KafkaError as exc:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=int(exc.code), error_message=exc.message
                )
            )
    return ControllerResult(
        records=records,
        response=CreatePartitionsResponse(results=tuple(results)),
        state_changes=sm.changes,
    )
