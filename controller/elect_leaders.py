"""ElectLeaders (preferred | unclean) and the automatic preferred-leader rebalance.

Per partition, as Kafka's controller: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; one
of a topic queued for deletion is INVALID_TOPIC_EXCEPTION "The topic is being deleted" (ZK
Kafka's processReplicaLeaderElection); a preferred election for a partition its preferred
replica already leads, or an unclean one for a partition with a live leader, is
ELECTION_NOT_NEEDED; otherwise the PartitionChangeBuilder elects (PREFERRED, or UNCLEAN: an
out-of-sync live replica when no in-sync one is) and when nothing changes the answer is
PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE. Electing for all partitions
(partitions=None) leaves out those answering ELECTION_NOT_NEEDED (Kafka's KafkaApis).

PREFERRED follows KRaft's PartitionChangeBuilder.electPreferredLeader: the preferred replica
when it is a valid leader (live, in the ISR); else the current leader stays when it is valid
(no record: PREFERRED_LEADER_NOT_AVAILABLE); else the next valid replica in assignment order
(an offline partition gets a leader). In that last case the record is written but the answer
is PREFERRED_LEADER_NOT_AVAILABLE, since the preferred replica does not lead: ZK-mode Kafka
answers that whenever the preferred replica cannot be elected (its preferred strategy elects
nobody else), while KRaft's ReplicationControlManager.electLeader answers NONE for any record.
Success therefore always means "the preferred replica leads now".

The rebalance check (Kafka's checkAndTriggerAutoLeaderRebalance): partitions of topics queued
for deletion are left out altogether; the others are grouped by preferred replica; a broker
whose group is led elsewhere for more than leader.imbalance.per.broker.percentage gets a
preferred election for those of its partitions where the preferred replica is live and in the
ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from controller.broker_lifecycle import iter_partitions
from controller.context import ControllerContext
from controller.election import preferred_replica_leader
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import (
    Liveness,
    PartitionState,
    StateChangeLog,
    partition_state,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    MetadataRecord,
    PartitionChangeRecord,
)
from protocol.names import TopicPartition


@dataclass(frozen=True, slots=True)
class AutoLeaderRebalance:
    """The periodic rebalance check (auto.leader.rebalance.enable); answered with the
    ElectLeadersResponse of the preferred elections it ran."""


def _elect_one(
    state: ControllerState,
    tp: TopicPartition,
    election_type: ElectionType,
    live: Liveness,
    deleting: Collection[str],
    sm: StateChangeLog,
) -> tuple[KafkaError | None, PartitionChangeRecord | None]:
    topic = state.topic(tp.topic)
    part = None if topic is None else topic.partitions.get(tp.partition)
    if topic is None or part is None:
        return KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {tp} does not exist."
        ), None
    if topic.topic_id in deleting:
        return KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"), None
    if election_type is ElectionType.PREFERRED:
        if part.leader == part.preferred_replica:
            return KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"), None
        election = Election.PREFERRED
    else:
        if part.leader != NO_LEADER and live.is_live_or_shutting_down(part.leader):
            return KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"), None
        election = Election.UNCLEAN
    record = (
        PartitionChangeBuilder(part, topic.topic_id, tp.partition, live.is_live)
        .set_election(election)
        .build()
    )
    # Kafka's onReplicaElection: the partition -> OnlinePartition with the election's strategy
    # (failed when it elects nobody: the partition keeps its state and leader).
    after = part if record is None else part.merge(record)
    sm.partition(
        tp.topic,
        tp.partition,
        partition_state(part, live),
        PartitionState.ONLINE,
        partition_state(after, live),
        failed=record is None,
    )
    if record is None:
        if election_type is ElectionType.PREFERRED:
            return KafkaError(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {tp} under strategy "
                "PreferredReplicaPartitionLeaderElectionStrategy",
            ), None
        return KafkaError(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition {tp} under strategy "
            "OfflinePartitionLeaderElectionStrategy(true)",
        ), None
    new_leader = part.leader if record.leader == NO_LEADER_CHANGE else record.leader
    if election_type is ElectionType.PREFERRED and new_leader != part.preferred_replica:
        # An offline partition got a leader, but not its preferred replica: the record stays
        # (KRaft's electPreferredLeader), the answer says the preferred one is not available.
        return KafkaError(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect the preferred replica {part.preferred_replica} for partition "
            f"{tp}: it is not live or not in the ISR; replica {new_leader} leads instead",
        ), record
    return None, record


def _run(
    state: ControllerState,
    election_type: ElectionType,
    partitions: Sequence[TopicPartition] | None,
    deleting: Collection[str],
) -> ControllerResult[ElectLeadersResponse]:
    live = Liveness.from_image(state.image)
    sm = StateChangeLog()
    all_partitions = partitions is None
    targets = (
        [TopicPartition(name, pid) for name, _, pid, _ in iter_partitions(state.image)]
        if partitions is None
        else list(dict.fromkeys(partitions))
    )
    records: list[MetadataRecord] = []
    by_topic: dict[str, list[ElectLeadersPartitionResult]] = {}
    for tp in targets:
        error, record = _elect_one(state, tp, election_type, live, deleting, sm)
        if record is not None:
            records.append(record)
        if error is not None and error.code is ErrorCode.ELECTION_NOT_NEEDED and all_partitions:
            continue
        by_topic.setdefault(tp.topic, []).append(
            ElectLeadersPartitionResult(
                partition_id=tp.partition,
                error_code=int(error.code) if error else 0,
                error_message=error.message if error else None,
            )
        )
    return ControllerResult(
        records=records,
        response=ElectLeadersResponse(
            replica_election_results=tuple(
                ReplicaElectionResult(topic=t, partition_result=tuple(r))
                for t, r in by_topic.items()
            )
        ),
        state_changes=sm.changes,
    )


def elect_leaders(
    state: ControllerState, request: ElectLeadersRequest, ctx: ControllerContext
) -> ControllerResult[ElectLeadersResponse]:
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unknown election type {request.election_type} (0 PREFERRED, 1 UNCLEAN).",
        ) from None
    partitions = (
        None
        if request.topic_partitions is None
        else [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    return _run(state, election_type, partitions, frozenset(ctx.topics_queued_for_deletion()))


def rebalance_candidates(
    state: ControllerState, percentage: int, excluded_topic_ids: Collection[str] = frozenset()
) -> list[TopicPartition]:
    """Partitions that get a preferred election from the rebalance check; topics in
    `excluded_topic_ids` (queued for deletion) count neither for the ratio nor as candidates."""
    live = Liveness.from_image(state.image)
    by_preferred: dict[int, list[tuple[TopicPartition, int, tuple[int, ...], tuple[int, ...]]]] = {}
    for name, topic_id, pid, part in iter_partitions(state.image):
        if part.replicas and topic_id not in excluded_topic_ids:
            by_preferred.setdefault(part.preferred_replica, []).append(
                (TopicPartition(name, pid), part.leader, part.replicas, part.isr)
            )
    candidates: list[TopicPartition] = []
    for broker_id in sorted(by_preferred):
        group = by_preferred[broker_id]
        not_led = [entry for entry in group if entry[1] != broker_id]
        if len(not_led) / len(group) > percentage / 100:
            candidates.extend(
                tp
                for tp, _, replicas, isr in not_led
                if preferred_replica_leader(replicas, isr, live.is_live) != NO_LEADER
            )
    return sorted(candidates)


def auto_leader_rebalance(
    state: ControllerState, request: AutoLeaderRebalance, ctx: ControllerContext
) -> ControllerResult[ElectLeadersResponse]:
    deleting = frozenset(ctx.topics_queued_for_deletion())
    candidates = rebalance_candidates(
        state, ctx.config.leader_imbalance_per_broker_percentage, deleting
    )
    return _run(state, ElectionType.PREFERRED, candidates, deleting)
