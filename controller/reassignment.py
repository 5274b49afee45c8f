"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), as Kafka's controller.

Starting a reassignment writes the partition's replicas as the target followed by the current
replicas not in it, with `adding_replicas` (target minus current) and `removing_replicas`
(current minus target); the new replicas then catch up and join the ISR through the leader's
AlterPartition, and the PartitionChangeBuilder completes the reassignment when every adding
replica is in the ISR: the removing ones leave the replicas and the ISR, and leadership moves to
the first target replica in sync if the leader is being removed (Kafka's reassign election).
A reassignment that needs no catch-up (a reorder, a pure removal) completes at once. A new
target for a partition already moving replaces the old one, starting from the original
replicas. A null target cancels: the adding replicas go and the original replicas come back
(NO_REASSIGNMENT_IN_PROGRESS when nothing is moving; refused when reverting would need an
unclean election the topic does not allow).
"""

from __future__ import annotations

from controller.assignment import validate_manual_assignment
from controller.configs import unclean_leader_election_enabled
from controller.context import ControllerContext
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import Liveness, StateChangeLog, reassignment_states
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from protocol.metadata.image import PartitionRegistration, TopicImage
from protocol.metadata.records import MetadataRecord, PartitionChangeRecord


def _original(part: PartitionRegistration) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Replicas and ISR as they were before the ongoing reassignment."""
    adding = set(part.adding_replicas)
    return (
        tuple(r for r in part.replicas if r not in adding),
        tuple(r for r in part.isr if r not in adding),
    )


def _reassign(
    state: ControllerState,
    topic: TopicImage,
    pid: int,
    target: tuple[int, ...] | None,
    ctx: ControllerContext,
) -> PartitionChangeRecord | None:
    part = topic.partitions.get(pid)
    if part is None:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Unable to find partition {topic.name}:{pid}.",
        )
    live = Liveness.from_image(state.image)
    builder = PartitionChangeBuilder(part, topic.topic_id, pid, live.is_live)
    if unclean_leader_election_enabled(state, topic.name, ctx):
        builder.set_election(Election.UNCLEAN)
    original, original_isr = _original(part)
    if target is None:
        if not part.adding_replicas and not part.removing_replicas:
            raise KafkaError(
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"Partition {topic.name}:{pid} has no ongoing reassignment.",
            )
        if not original_isr and not unclean_leader_election_enabled(state, topic.name, ctx):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {topic.name}:{pid} because it "
                "would require an unclean leader election.",
            )
        builder.set_target_replicas(original).set_target_isr(original_isr)
        builder.set_target_adding(()).set_target_removing(())
        return builder.build()
    validate_manual_assignment(state, target)
    merged = target + tuple(r for r in original if r not in target)
    builder.set_target_replicas(merged)
    builder.set_target_adding(tuple(r for r in target if r not in original))
    builder.set_target_removing(tuple(r for r in original if r not in target))
    return builder.build()


def alter_partition_reassignments(
    state: ControllerState, request: AlterPartitionReassignmentsRequest, ctx: ControllerContext
) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    records: list[MetadataRecord] = []
    sm = StateChangeLog()
    liveness = Liveness.from_image(state.image)
    responses = []
    for topic_req in request.topics:
        topic = state.topic(topic_req.name)
        results = []
        for p in topic_req.partitions:
            error: KafkaError | None = None
            try:
                if topic is None:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Unable to find partition {topic_req.name}:{p.partition_index}.",
                    )
                record = _reassign(state, topic, p.partition_index, p.replicas, ctx)
                if record is not None:
                    records.append(record)
                    part = topic.partitions[p.partition_index]
                    reassignment_states(
                        sm, topic.name, p.partition_index, part, part.merge(record), liveness
                    )
            except KafkaError as exc:
                error = exc
            results.append(
                ReassignablePartitionResponse(
                    partition_index=p.partition_index,
                    error_code=int(error.code) if error else 0,
                    error_message=error.message if error else None,
                )
            )
        responses.append(ReassignableTopicResponse(name=topic_req.name, partitions=tuple(results)))
    return ControllerResult(
        records=records,
        response=AlterPartitionReassignmentsResponse(responses=tuple(responses)),
        state_changes=sm.changes,
    )


def list_partition_reassignments(
    state: ControllerState, request: ListPartitionReassignmentsRequest, ctx: ControllerContext
) -> ControllerResult[ListPartitionReassignmentsResponse]:
    """Ongoing reassignments; unknown topics and partitions are left out, as Kafka's."""
    topics = state.image.topics.by_name
    if request.topics is None:
        wanted = [(name, sorted(topics[name].partitions)) for name in sorted(topics)]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
    result = []
    for name, pids in wanted:
        topic = topics.get(name)
        if topic is None:
            continue
        ongoing = []
        for pid in pids:
            part = topic.partitions.get(pid)
            if part is not None and (part.adding_replicas or part.removing_replicas):
                ongoing.append(
                    OngoingPartitionReassignment(
                        partition_index=pid,
                        replicas=part.replicas,
                        adding_replicas=part.adding_replicas,
                        removing_replicas=part.removing_replicas,
                    )
                )
        if ongoing:
            result.append(OngoingTopicReassignment(name=name, partitions=tuple(ongoing)))
    return ControllerResult(
        records=[], response=ListPartitionReassignmentsResponse(topics=tuple(result))
    )
