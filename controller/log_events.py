"""What a controller event did, for the log events analytics reads (protocol.telemetry): pure.

The operations stay as they are, `(state, request) -> (records, response)`; these functions read
an event's records next to the images around it and say which brokers it found failed
(`broker_failures`) and which leaders it elected, with the cause (`leader_elections`). The
driver (controller.service.driver) logs them: failures when the event runs, elections once its records
are committed. Both modes go through here, so ZK and Raft report the same events the same way.

Only the partitions and brokers the records name are looked at: an event costs what it wrote,
not the size of the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.broker_lifecycle import BrokerChange
from controller.dead_brokers import FenceDeadBroker
from controller.elect_leaders import AutoLeaderRebalance
from controller.raft_lifecycle import FenceStaleBrokers
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.broker_lifecycle import BrokerHeartbeatRequest, BrokerRegistrationRequest
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.reassignments import AlterPartitionReassignmentsRequest
from protocol.metadata.image import MetadataImage, PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)


def event_type(request: object) -> str:
    """The event's name as the logs give it: Kafka's API name (the request type without
    'Request') or the internal event's (BrokerChange, FenceStaleBrokers, WriteNoOp, ...)."""
    name = type(request).__name__
    return name.removesuffix("Request") if name != "Request" else name


@dataclass(frozen=True, slots=True)
class BrokerFailure:
    broker_id: int
    broker_epoch: int
    reason: str
    """One of protocol.telemetry.BROKER_FAILURE_REASONS."""
    metadata_mode: str
    """"zk" (an UnregisterBrokerRecord: ZK mode's way out) or "raft" (a FenceBrokerRecord)."""


def broker_failures(
    request: object, before: MetadataImage, records: Sequence[MetadataRecord]
) -> list[BrokerFailure]:
    """The brokers this event's records take out of service that were up (registered,
    unfenced, not in controlled shutdown) before it: ZK's UnregisterBrokerRecord of a
    BrokerChange (bounced when the same event registers it again), Raft's FenceBrokerRecord
    (session expired, a new incarnation registering, or the broker asking). A broker leaving
    after a controlled shutdown, or unregistered on request, did not fail."""
    if not isinstance(
        request,
        BrokerChange
        | FenceStaleBrokers
        | FenceDeadBroker
        | BrokerRegistrationRequest
        | BrokerHeartbeatRequest,
    ):
        return []
    if isinstance(request, BrokerHeartbeatRequest) and request.want_shut_down:
        return []  # SHUTDOWN_NOW fences a broker that finished its controlled shutdown
    reregistered = {r.broker_id for r in records if isinstance(r, RegisterBrokerRecord)}
    out: list[BrokerFailure] = []
    seen: set[int] = set()
    for record in records:
        if isinstance(record, UnregisterBrokerRecord):
            broker_id = record.broker_id
            reason = "bounced" if broker_id in reregistered else "znode_deleted"
            if isinstance(request, FenceDeadBroker):
                reason = "process_dead"
            mode = "zk"
        elif isinstance(record, FenceBrokerRecord):
            broker_id = record.id
            reason = _fence_reason(request)
            mode = "raft"
        else:
            continue
        reg = before.cluster.broker(broker_id)
        if reg is None or reg.fenced or reg.in_controlled_shutdown or broker_id in seen:
            continue
        seen.add(broker_id)
        out.append(BrokerFailure(broker_id, reg.epoch, reason, mode))
    return out


def _fence_reason(request: object) -> str:
    if isinstance(request, FenceDeadBroker):
        return "process_dead"
    if isinstance(request, BrokerRegistrationRequest):
        return "new_incarnation"
    if isinstance(request, BrokerHeartbeatRequest):
        return "fence_requested"
    return "session_expired"


@dataclass(frozen=True, slots=True)
class LeaderElection:
    topic: str
    partition: int
    leader: int
    previous_leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    cause: str
    """One of protocol.telemetry.ELECTION_CAUSES."""
    unclean: bool


def leader_elections(
    request: object,
    before: MetadataImage,
    after: MetadataImage,
    records: Sequence[MetadataRecord],
) -> list[LeaderElection]:
    """Every partition the records gave a new leader (not none), in record order, with the
    cause of the election. `before` and `after` are the images around the event."""
    out: list[LeaderElection] = []
    seen: set[tuple[str, int]] = set()
    for record in records:
        if not isinstance(record, PartitionRecord | PartitionChangeRecord):
            continue
        key = (record.topic_id, record.partition_id)
        if key in seen:
            continue
        seen.add(key)
        topic = after.topics.get_topic_by_id(record.topic_id)
        new = after.topics.get_partition(*key)
        if topic is None or new is None or new.leader == NO_LEADER:
            continue
        old = before.topics.get_partition(*key)
        if old is not None and old.leader == new.leader:
            continue  # the same leader (a new epoch at most): no election
        unclean = _unclean(old, new)
        out.append(
            LeaderElection(
                topic=topic.name,
                partition=record.partition_id,
                leader=new.leader,
                previous_leader=NO_LEADER if old is None else old.leader,
                leader_epoch=new.leader_epoch,
                isr=tuple(new.isr),
                cause=_cause(request, old, new, after, unclean),
                unclean=unclean,
            )
        )
    return out


def _unclean(old: PartitionRegistration | None, new: PartitionRegistration) -> bool:
    """Only an unclean election sets RECOVERING, and its leader was out of the ISR."""
    return (
        old is not None
        and new.leader_recovery_state == LeaderRecoveryState.RECOVERING
        and new.leader not in old.isr
    )


def _cause(
    request: object,
    old: PartitionRegistration | None,
    new: PartitionRegistration,
    after: MetadataImage,
    unclean: bool,
) -> str:
    """Kafka's election strategies, told apart by what the images show first, then by the
    request (the same leader change can only come from these)."""
    if old is None:
        return "new_partition"
    if unclean:
        return "unclean"
    previous = after.cluster.broker(old.leader) if old.leader != NO_LEADER else None
    if previous is None or previous.fenced:
        return "offline"  # no leader, or its broker is gone or fenced
    if previous.in_controlled_shutdown:
        return "controlled_shutdown"
    if isinstance(request, AlterPartitionReassignmentsRequest | AlterPartitionRequest):
        return "reassignment"  # a completed reassignment moved it off a removed replica
    if isinstance(request, AutoLeaderRebalance):
        return "auto_rebalance"
    if isinstance(request, ElectLeadersRequest):
        return "preferred"
    # What is left: a leader not among the replicas any more, or not acceptable to the
    # controller although registered (a broker change that bounced it): as offline.
    return "reassignment" if old.leader not in new.replicas else "offline"
