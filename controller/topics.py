"""CreateTopics and DeleteTopics as pure operations (Kafka's ReplicationControlManager).

CreateTopics checks, in Kafka's order: names given twice in the request (INVALID_REQUEST for
every copy), legal names and '.'/'_' collisions with existing topics (INVALID_TOPIC_EXCEPTION),
existing topics (TOPIC_ALREADY_EXISTS), configs (INVALID_CONFIG naming the key), then the
partition count, replication factor or manual assignment. Each topic succeeds or fails alone;
the records of those that succeed are committed together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from controller.assignment import validate_manual_assignment
from controller.configs import parse_topic_configs
from controller.context import ControllerContext
from controller.election import new_partition_leadership
from controller.placement import assign_replicas
from controller.result import ControllerResult
from controller.state import ControllerState, has_collision_chars, unify_collision_chars
from controller.state_machines import (
    Liveness,
    PartitionState,
    ReplicaState,
    StateChangeLog,
    partition_state,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.configs import ResourceType
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import ConfigRecord, MetadataRecord, RemoveTopicRecord, TopicRecord
from protocol.names import METADATA_TOPIC, topic_name_problem

MAX_REPLICATION_FACTOR = 2**15 - 1
"""Kafka's replication factor is an int16."""


def _error(code: ErrorCode, message: str) -> KafkaError:
    return KafkaError(code, message)


def _manual_partitions(
    state: ControllerState, topic: CreatableTopic
) -> list[PartitionRegistration]:
    if topic.replication_factor != -1:
        raise _error(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        )
    if topic.num_partitions != -1:
        raise _error(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    parts: dict[int, PartitionRegistration] = {}
    replication_factor: int | None = None
    for assignment in topic.assignments:
        index = assignment.partition_index
        if index in parts:
            raise _error(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {index}.",
            )
        validate_manual_assignment(state, assignment.broker_ids, replication_factor)
        replication_factor = len(assignment.broker_ids)
        leadership = new_partition_leadership(assignment.broker_ids, state.is_usable)
        if not leadership.isr:
            raise _error(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown.",
            )
        parts[index] = PartitionRegistration(
            replicas=assignment.broker_ids, isr=leadership.isr, leader=leadership.leader
        )
    if sorted(parts) != list(range(len(parts))):
        raise _error(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence, got "
            f"{sorted(parts)[:10]}{'...' if len(parts) > 10 else ''}",
        )
    return [parts[i] for i in range(len(parts))]


def _placed_partitions(
    state: ControllerState, topic: CreatableTopic, ctx: ControllerContext
) -> list[PartitionRegistration]:
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise _error(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be larger than 0, or -1 to use the default value; got "
            f"{topic.replication_factor}.",
        )
    if topic.replication_factor > MAX_REPLICATION_FACTOR:
        raise _error(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor {topic.replication_factor} is above the maximum "
            f"{MAX_REPLICATION_FACTOR}.",
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise _error(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions was set to an invalid non-positive value ({topic.num_partitions}).",
        )
    num_partitions = _num_partitions(topic, ctx)
    replication_factor = (
        ctx.config.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    brokers = state.usable_brokers()
    placement = assign_replicas(brokers, num_partitions, replication_factor, ctx.rng)
    partitions = []
    for replicas in placement:
        leadership = new_partition_leadership(replicas, state.is_usable)
        partitions.append(
            PartitionRegistration(replicas=replicas, isr=leadership.isr, leader=leadership.leader)
        )
    return partitions


def _num_partitions(topic: CreatableTopic, ctx: ControllerContext) -> int:
    if topic.assignments:
        return len(topic.assignments)
    return ctx.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions


def _new_topic_id(state: ControllerState, ctx: ControllerContext, taken: set[str]) -> str:
    while True:
        topic_id = ctx.new_topic_id()
        if topic_id not in taken and state.image.topics.get_topic_by_id(topic_id) is None:
            taken.add(topic_id)
            return topic_id


def new_partition_states(
    sm: StateChangeLog,
    topic: str,
    partitions: Iterable[tuple[int, PartitionRegistration]],
    liveness: Liveness,
) -> None:
    """Kafka's onNewPartitionCreation: NonExistent -> New for the partition and its replicas,
    then New -> Online (failing, the partition staying New, when none of its replicas is up to
    lead) and the replicas New -> Online."""
    for pid, part in partitions:
        sm.partition(topic, pid, PartitionState.NON_EXISTENT, PartitionState.NEW)
        for r in part.replicas:
            sm.replica(topic, pid, r, ReplicaState.NON_EXISTENT, ReplicaState.NEW)
        sm.partition(
            topic, pid, PartitionState.NEW, PartitionState.ONLINE, partition_state(part, liveness)
        )
        for r in part.replicas:
            sm.replica(topic, pid, r, ReplicaState.NEW, ReplicaState.ONLINE)


def create_topics(
    state: ControllerState, request: CreateTopicsRequest, ctx: ControllerContext
) -> ControllerResult[CreateTopicsResponse]:
    topics = request.topics
    errors: dict[int, KafkaError] = {}
    counts = Counter(t.name for t in topics)
    for i, topic in enumerate(topics):
        if counts[topic.name] > 1:
            errors[i] = _error(
                ErrorCode.INVALID_REQUEST, f"Duplicate topic name {topic.name!r} in the request."
            )
    for i, topic in enumerate(topics):
        if i in errors:
            continue
        problem = topic_name_problem(topic.name)
        if problem is not None:
            errors[i] = _error(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        elif topic.name == METADATA_TOPIC:
            # Its partition's directory is the metadata log's own (metadata.log.dir defaults
            # to the log dir): a topic of that name would be the metadata log.
            errors[i] = _error(
                ErrorCode.INVALID_REQUEST,
                f"Creation of internal topic {METADATA_TOPIC} is prohibited.",
            )
        elif state.topic(topic.name) is not None:
            errors[i] = _error(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic {topic.name!r} already exists."
            )
        elif (other := state.colliding_topic(topic.name)) is not None:
            errors[i] = _error(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic {topic.name!r} collides with existing topic: {other} (topic names that "
                "differ only in '.' and '_' collide in metric names).",
            )
    total = sum(_num_partitions(t, ctx) for i, t in enumerate(topics) if i not in errors)
    if total > ctx.config.max_partitions_per_request:
        for i in range(len(topics)):
            errors.setdefault(
                i,
                _error(
                    ErrorCode.POLICY_VIOLATION,
                    f"Excessively large number of partitions per request: {total} requested, "
                    f"at most {ctx.config.max_partitions_per_request} allowed.",
                ),
            )
    configs: dict[int, dict[str, str]] = {}
    for i, topic in enumerate(topics):
        if i in errors:
            continue
        try:
            configs[i] = parse_topic_configs((c.name, c.value) for c in topic.configs)
        except KafkaError as exc:
            errors[i] = exc
    records: list[MetadataRecord] = []
    sm = StateChangeLog()
    liveness = Liveness.from_image(state.image)
    results: dict[int, CreatableTopicResult] = {}
    created: dict[str, str] = {}
    taken_ids: set[str] = set()
    for i, topic in enumerate(topics):
        if i in errors:
            continue
        try:
            if topic.assignments:
                partitions = _manual_partitions(state, topic)
            else:
                partitions = _placed_partitions(state, topic, ctx)
        except KafkaError as exc:
            errors[i] = exc
            continue
        if has_collision_chars(topic.name):
            unified = unify_collision_chars(topic.name)
            if unified in created:
                errors[i] = _error(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic {topic.name!r} collides with topic {created[unified]!r} created in "
                    "the same request.",
                )
                continue
            created[unified] = topic.name
        topic_id = _new_topic_id(state, ctx, taken_ids)
        if not request.validate_only:
            for name, value in configs[i].items():
                records.append(
                    ConfigRecord(
                        resource_type=int(ResourceType.TOPIC),
                        resource_name=topic.name,
                        name=name,
                        value=value,
                    )
                )
            records.append(TopicRecord(name=topic.name, topic_id=topic_id))
            records.extend(p.to_record(topic_id, pid) for pid, p in enumerate(partitions))
            new_partition_states(sm, topic.name, enumerate(partitions), liveness)
        results[i] = CreatableTopicResult(
            name=topic.name,
            error_code=0,
            topic_id="" if request.validate_only else topic_id,
            num_partitions=len(partitions),
            replication_factor=len(partitions[0].replicas),
        )
    response = CreateTopicsResponse(
        topics=tuple(
            results[i]
            if i in results
            else CreatableTopicResult(
                name=t.name, error_code=int(errors[i].code), error_message=errors[i].message
            )
            for i, t in enumerate(topics)
        )
    )
    return ControllerResult(records=records, response=response, state_changes=sm.changes)


def delete_topics(
    state: ControllerState, request: DeleteTopicsRequest, ctx: ControllerContext
) -> ControllerResult[DeleteTopicsResponse]:
    """RemoveTopicRecord per existing topic; its partitions and configs go with it on replay."""
    counts = Counter(request.topic_names)
    records: list[MetadataRecord] = []
    sm = StateChangeLog()
    liveness = Liveness.from_image(state.image)
    results = []
    for name in request.topic_names:
        topic = state.topic(name)
        error: KafkaError | None = None
        if counts[name] > 1:
            error = _error(
                ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name!r} in the request."
            )
        elif not ctx.config.delete_topic_enable:
            error = _error(
                ErrorCode.TOPIC_DELETION_DISABLED,
                "Topic deletion is disabled (delete.topic.enable=false).",
            )
        elif topic is None:
            error = _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist.")
        if error is not None or topic is None:
            results.append(
                DeletableTopicResult(
                    name=name,
                    error_code=int(error.code) if error else 0,
                    error_message=error.message if error else None,
                )
            )
            continue
        records.append(RemoveTopicRecord(topic_id=topic.topic_id))
        # Kafka's onPartitionDeletion: OfflinePartition, then NonExistentPartition.
        for pid in sorted(topic.partitions):
            current = partition_state(topic.partitions[pid], liveness)
            offline = sm.partition(name, pid, current, PartitionState.OFFLINE)
            sm.partition(name, pid, offline, PartitionState.NON_EXISTENT)
        results.append(DeletableTopicResult(name=name, error_code=0, topic_id=topic.topic_id))
    return ControllerResult(
        records=records,
        response=DeleteTopicsResponse(responses=tuple(results)),
        state_changes=sm.changes,
    )
