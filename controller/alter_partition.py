"""AlterPartition: a partition leader's ISR proposal (KIP-497), checked as Kafka's controller.

Request level: the broker must be registered with exactly the given broker epoch
(STALE_BROKER_EPOCH otherwise). Per partition, in order: the topic id must be the one the
controller knows (UNKNOWN_TOPIC_ID: a recreated topic never takes a stale leader's proposal,
KIP-516) and the partition must exist (UNKNOWN_TOPIC_OR_PARTITION); the leader epoch must be the
current one (FENCED_LEADER_EPOCH); the sender must be the leader (NOT_LEADER_OR_FOLLOWER); a
proposal equal to the current state is answered with it (idempotent retries); else the
partition epoch must be the current one (INVALID_UPDATE_VERSION); the ISR must name distinct
assigned replicas including the leader, and RECOVERING only with a lone leader and never back
from RECOVERED (INVALID_REQUEST); every ISR member must be live (INELIGIBLE_REPLICA: fenced,
unregistered or shutting down, KIP-841). An accepted change is one PartitionChangeRecord (the
partition epoch goes up, the leader epoch does not); if it completes a reassignment that moves
leadership, the answer is NEW_LEADER_ELECTED.
"""

from __future__ import annotations

from controller.configs import unclean_leader_election_enabled
from controller.context import ControllerContext
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import Liveness, StateChangeLog, reassignment_states
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
)


def _failed(pid: int, code: ErrorCode) -> AlterPartitionPartitionResult:
    return AlterPartitionPartitionResult(partition_index=pid, error_code=int(code))


def _current(pid: int, part: PartitionRegistration) -> AlterPartitionPartitionResult:
    return AlterPartitionPartitionResult(
        partition_index=pid,
        error_code=0,
        leader_id=part.leader,
        leader_epoch=part.leader_epoch,
        isr=part.isr,
        leader_recovery_state=part.leader_recovery_state,
        partition_epoch=part.partition_epoch,
    )


def _validate(
    broker_id: int, part: PartitionRegistration, data: AlterPartitionPartition, live: Liveness
) -> ErrorCode | None:
    """An error code, None when valid, or ErrorCode.NONE when the state already matches."""
    if data.leader_epoch != part.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != part.leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if (
        data.new_isr == part.isr
        and data.leader_recovery_state == part.leader_recovery_state
        and data.partition_epoch <= part.partition_epoch
    ):
        return ErrorCode.NONE
    if data.partition_epoch != part.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    isr = data.new_isr
    if len(set(isr)) != len(isr) or any(r not in part.replicas for r in isr):
        return ErrorCode.INVALID_REQUEST
    if part.leader not in isr:
        return ErrorCode.INVALID_REQUEST
    if data.leader_recovery_state not in (0, 1):
        return ErrorCode.INVALID_REQUEST
    if data.leader_recovery_state == LeaderRecoveryState.RECOVERING and len(isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if (
        part.leader_recovery_state == LeaderRecoveryState.RECOVERED
        and data.leader_recovery_state == LeaderRecoveryState.RECOVERING
    ):
        return ErrorCode.INVALID_REQUEST
    if any(not live.is_live(r) for r in isr if r != broker_id):
        return ErrorCode.INELIGIBLE_REPLICA
    return None


def alter_partition(
    state: ControllerState, request: AlterPartitionRequest, ctx: ControllerContext
) -> ControllerResult[AlterPartitionResponse]:
    image = state.image
    reg = image.cluster.broker(request.broker_id)
    if reg is None or reg.fenced or reg.epoch != request.broker_epoch:
        return ControllerResult(
            records=[],
            response=AlterPartitionResponse(
                error_code=int(ErrorCode.STALE_BROKER_EPOCH),
                # Never the current epoch: it is what a forged request would need.
                error_message=f"Broker {request.broker_id} epoch {request.broker_epoch} is not "
                "the current registration.",
            ),
        )
    live = Liveness.from_image(image)
    records: list[MetadataRecord] = []
    sm = StateChangeLog()
    topics = []
    for topic_data in request.topics:
        topic = (
            image.topics.get_topic_by_id(topic_data.topic_id)
            if topic_data.topic_id
            else image.topics.get_topic(topic_data.topic_name)
        )
        results = []
        for data in topic_data.partitions:
            pid = data.partition_index
            if topic is None:
                code = (
                    ErrorCode.UNKNOWN_TOPIC_ID
                    if topic_data.topic_id
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                results.append(_failed(pid, code))
                continue
            part = topic.partitions.get(pid)
            if part is None:
                results.append(_failed(pid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            error = _validate(request.broker_id, part, data, live)
            if error is ErrorCode.NONE:
                results.append(_current(pid, part))
                continue
            if error is not None:
                results.append(_failed(pid, error))
                continue
            leader = request.broker_id

            def acceptable(r: int, leader: int = leader) -> bool:
                return r == leader or live.is_live(r)

            builder = PartitionChangeBuilder(
                part, topic.topic_id, pid, acceptable, bump_leader_epoch_on_isr_shrink=False
            )
            builder.set_target_isr(data.new_isr)
            builder.set_target_leader_recovery_state(
                LeaderRecoveryState(data.leader_recovery_state)
            )
            if unclean_leader_election_enabled(state, topic.name, ctx):
                builder.set_election(Election.UNCLEAN)
            record: PartitionChangeRecord | None = builder.build()
            if record is not None:
                records.append(record)
                before, part = part, part.merge(record)
                # The ISR reaching the adding replicas completes a reassignment.
                reassignment_states(sm, topic.name, pid, before, part, live)
                if record.leader not in (NO_LEADER_CHANGE, request.broker_id):
                    results.append(_failed(pid, ErrorCode.NEW_LEADER_ELECTED))
                    continue
            results.append(_current(pid, part))
        topics.append(
            AlterPartitionTopicResult(
                topic_name=topic.name if topic is not None else topic_data.topic_name,
                topic_id=topic_data.topic_id,
                partitions=tuple(results),
            )
        )
    return ControllerResult(
        records=records,
        response=AlterPartitionResponse(topics=tuple(topics)),
        state_changes=sm.changes,
    )
