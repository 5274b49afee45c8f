"""What the controller tells brokers after an event (Kafka's ControllerBrokerRequestBatch), pure.

`plan_propagation(before, after, controller)` compares the images before and after one event's
committed records and returns, per live broker, the requests Kafka's ControllerChannelManager
would send for it, batched (at most one LeaderAndIsr, one UpdateMetadata, one StopReplica per
broker per event), all stamped with the controller's id and epoch and the receiving broker's
epoch:

- LeaderAndIsr to the live replicas of every partition created or whose leader, ISR, replicas
  or epochs changed (`is_new` for a replica the partition did not have), and to a broker that
  just came up (or came back with a new epoch) a FULL LeaderAndIsr (type 1, KIP-516/KIP-866)
  with every partition it hosts, as Kafka's OnlineReplica transition does: the broker deletes
  the logs a FULL request does not name (stray replicas of topics deleted while it was down,
  or of an older topic with the same name);
- StopReplica with delete_partition=true to the live replicas of a deleted topic (leader epoch
  -2, Kafka's EpochDuringDelete) unless it was deleted in Kafka's ZK-mode order (in `deleting`:
  its replicas were stopped and deleted before its RemoveTopicRecord), and to replicas a
  reassignment removed; with
  delete_partition=false to a broker entering controlled shutdown for the partitions it only
  follows (it stops fetching; its log stays);
- UpdateMetadata to every live broker whenever partitions or brokers changed, naming the
  changed partitions (a deleted topic's with leader -2, LeaderDuringDelete) and all live
  brokers; a broker that just came up gets every partition.

`plan_failover(image, controller)` is what a new controller sends: a full LeaderAndIsr
(type FULL, empty for a broker hosting nothing) to every live broker and a full UpdateMetadata
to every live broker. Topic ids ride on every partition, so a broker holding a replica of an
older topic with the same name sees the difference (KIP-516).

Topics queued for deletion (`deleting`, topic ids; controller.topic_deletion) get no
LeaderAndIsr (a replica must not be recreated while the deletion removes it) and UpdateMetadata
shows them with leader -2, as Kafka's onTopicDeletion does; `plan_topic_deletion` sends that
UpdateMetadata to every live broker when a topic is queued, and the deletion's StopReplicas.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from protocol.messages import Request
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    LeaderAndIsrType,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from protocol.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration

LEADER_DURING_DELETE = -2
"""Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata's leader for a topic being deleted."""
EPOCH_DURING_DELETE = -2
"""Kafka's LeaderAndIsr.EpochDuringDelete: StopReplica's leader epoch for a deleted topic."""


@dataclass(frozen=True, slots=True)
class ControllerIdentity:
    controller_id: int
    controller_epoch: int
    inter_broker_listener: str = "PLAINTEXT"
    """The listener whose endpoint LeaderAndIsr's live_leaders carry (inter.broker.listener.name);
    a broker without it is named by its first endpoint."""


@dataclass(frozen=True, slots=True)
class BrokerRequests:
    """One broker's requests for one event, in the order Kafka sends them."""

    broker_id: int
    leader_and_isr: LeaderAndIsrRequest | None = None
    update_metadata: UpdateMetadataRequest | None = None
    stop_replica: StopReplicaRequest | None = None

    def requests(self) -> list[LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest]:
        return [r for r in (self.leader_and_isr, self.update_metadata, self.stop_replica) if r]


_Key = tuple[str, str, int]
"""(topic name, topic id, partition id)."""


@dataclass
class _Batch:
    leader_and_isr: dict[_Key, LeaderAndIsrPartitionState] = field(default_factory=dict)
    stop: dict[_Key, StopReplicaPartitionState] = field(default_factory=dict)


def _live(image: MetadataImage) -> dict[int, BrokerRegistration]:
    return {i: b for i, b in sorted(image.cluster.brokers.items()) if not b.fenced}


def _lai_state(
    pid: int, part: PartitionRegistration, controller_epoch: int, is_new: bool
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        partition_index=pid,
        controller_epoch=controller_epoch,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        isr=part.isr,
        partition_epoch=part.partition_epoch,
        replicas=part.replicas,
        adding_replicas=part.adding_replicas,
        removing_replicas=part.removing_replicas,
        is_new=is_new,
        leader_recovery_state=part.leader_recovery_state,
    )


def _um_state(
    pid: int, part: PartitionRegistration, controller_epoch: int, live: Mapping[int, object]
) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        partition_index=pid,
        controller_epoch=controller_epoch,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        isr=part.isr,
        partition_epoch=part.partition_epoch,
        replicas=part.replicas,
        offline_replicas=tuple(r for r in part.replicas if r not in live),
    )


def _during_delete(part: PartitionRegistration) -> PartitionRegistration:
    """The partition as brokers see it while its topic is deleted (leader -2)."""
    return PartitionRegistration(
        replicas=part.replicas,
        isr=part.isr,
        leader=LEADER_DURING_DELETE,
        leader_epoch=part.leader_epoch,
        partition_epoch=part.partition_epoch,
    )


def _grouped(items: Iterable[tuple[_Key, object]]) -> dict[tuple[str, str], list]:
    by_topic: dict[tuple[str, str], list] = {}
    for (name, topic_id, _), state in sorted(items, key=lambda kv: kv[0]):
        by_topic.setdefault((name, topic_id), []).append(state)
    return by_topic


def _live_leader(
    broker: BrokerRegistration | None, broker_id: int, listener: str
) -> LeaderAndIsrLiveLeader:
    endpoint = None
    if broker is not None:
        endpoint = broker.endpoint(listener) or (broker.endpoints[0] if broker.endpoints else None)
    return LeaderAndIsrLiveLeader(
        broker_id=broker_id,
        host_name=endpoint.host if endpoint else "",
        port=endpoint.port if endpoint else -1,
    )


def _live_brokers(live: Mapping[int, BrokerRegistration]) -> tuple[UpdateMetadataBroker, ...]:
    return tuple(
        UpdateMetadataBroker(
            id=b.broker_id,
            endpoints=tuple(
                UpdateMetadataEndpoint(
                    port=e.port, host=e.host, listener=e.name, security_protocol=e.security_protocol
                )
                for e in b.endpoints
            ),
            rack=b.rack,
        )
        for b in live.values()
    )


def _build(
    image: MetadataImage,
    controller: ControllerIdentity,
    batches: Mapping[int, _Batch],
    metadata: Mapping[_Key, UpdateMetadataPartitionState] | None,
    full_metadata_for: Iterable[int],
    full_leader_and_isr_for: Collection[int] = (),
    deleting: Collection[str] = (),
) -> dict[int, BrokerRequests]:
    live = _live(image)
    epoch = controller.controller_epoch
    full_for = set(full_metadata_for)
    full_states: dict[_Key, UpdateMetadataPartitionState] | None = None
    if full_for:
        full_states = {
            (t.name, t.topic_id, pid): _um_state(
                pid, _during_delete(p) if t.topic_id in deleting else p, epoch, live
            )
            for t in image.topics.by_id.values()
            for pid, p in t.partitions.items()
        }
    plans: dict[int, BrokerRequests] = {}
    for broker_id, broker in live.items():
        batch = batches.get(broker_id, _Batch())
        lai = None
        full = broker_id in full_leader_and_isr_for
        if batch.leader_and_isr or full:
            topics = _grouped(batch.leader_and_isr.items())
            leaders = sorted({s.leader for s in batch.leader_and_isr.values() if s.leader >= 0})
            lai = LeaderAndIsrRequest(
                controller_id=controller.controller_id,
                controller_epoch=epoch,
                broker_epoch=broker.epoch,
                topic_states=tuple(
                    LeaderAndIsrTopicState(topic_name=n, topic_id=t, partition_states=tuple(s))
                    for (n, t), s in topics.items()
                ),
                live_leaders=tuple(
                    _live_leader(live.get(i), i, controller.inter_broker_listener)
                    for i in leaders
                    if i in live
                ),
                type=int(LeaderAndIsrType.FULL if full else LeaderAndIsrType.INCREMENTAL),
            )
        stop = None
        if batch.stop:
            stop = StopReplicaRequest(
                controller_id=controller.controller_id,
                controller_epoch=epoch,
                broker_epoch=broker.epoch,
                topic_states=tuple(
                    StopReplicaTopicState(topic_name=n, topic_id=t, partition_states=tuple(s))
                    for (n, t), s in _grouped(batch.stop.items()).items()
                ),
            )
        states = full_states if broker_id in full_for else metadata
        um = None
        if states is not None:
            um = UpdateMetadataRequest(
                controller_id=controller.controller_id,
                controller_epoch=epoch,
                broker_epoch=broker.epoch,
                topic_states=tuple(
                    UpdateMetadataTopicState(topic_name=n, topic_id=t, partition_states=tuple(s))
                    for (n, t), s in _grouped(states.items()).items()
                ),
                live_brokers=_live_brokers(live),
            )
        if lai or um or stop:
            plans[broker_id] = BrokerRequests(broker_id, lai, um, stop)
    return plans


def plan_propagation(
    before: MetadataImage,
    after: MetadataImage,
    controller: ControllerIdentity,
    *,
    deleting: Collection[str] = (),
) -> dict[int, BrokerRequests]:
    """Per live broker (after the event), the requests one event's records call for.
    `deleting`: ids of topics queued for deletion (see the module doc)."""
    live = _live(after)
    was_live = _live(before)
    epoch = controller.controller_epoch
    started = {i for i, b in live.items() if i not in was_live or was_live[i].epoch != b.epoch}
    entering_shutdown = {
        i
        for i, b in live.items()
        if b.in_controlled_shutdown
        and not (i in was_live and was_live[i].in_controlled_shutdown and i not in started)
    }
    batches: dict[int, _Batch] = {}
    metadata: dict[_Key, UpdateMetadataPartitionState] = {}

    def batch(broker_id: int) -> _Batch:
        return batches.setdefault(broker_id, _Batch())

    for topic_id, topic in before.topics.by_id.items():
        if topic_id in after.topics.by_id:
            continue
        for pid, part in topic.partitions.items():
            key = (topic.name, topic_id, pid)
            metadata[key] = _um_state(pid, _during_delete(part), epoch, live)
            if topic_id in deleting:
                continue  # its replicas were deleted before the RemoveTopicRecord
            for r in part.replicas:
                if r in live:
                    batch(r).stop[key] = StopReplicaPartitionState(
                        partition_index=pid,
                        leader_epoch=EPOCH_DURING_DELETE,
                        delete_partition=True,
                    )
    for topic_id, topic in after.topics.by_id.items():
        old_topic = before.topics.by_id.get(topic_id)
        being_deleted = topic_id in deleting
        for pid, part in topic.partitions.items():
            key = (topic.name, topic_id, pid)
            old = None if old_topic is None else old_topic.partitions.get(pid)
            changed = old != part
            if being_deleted:
                # No LeaderAndIsr may recreate a replica the deletion is removing.
                if changed:
                    metadata[key] = _um_state(pid, _during_delete(part), epoch, live)
                continue
            if changed:
                metadata[key] = _um_state(pid, part, epoch, live)
            for r in part.replicas:
                if r not in live:
                    continue
                if changed or r in started:
                    is_new = old is None or r not in old.replicas
                    batch(r).leader_and_isr[key] = _lai_state(pid, part, epoch, is_new)
                if r in entering_shutdown and part.leader != r:
                    batch(r).stop[key] = StopReplicaPartitionState(
                        partition_index=pid,
                        leader_epoch=part.leader_epoch,
                        delete_partition=False,
                    )
            if old is not None:
                for r in old.replicas:
                    if r not in part.replicas and r in live:
                        batch(r).stop[key] = StopReplicaPartitionState(
                            partition_index=pid,
                            leader_epoch=part.leader_epoch,
                            delete_partition=True,
                        )
    brokers_changed = set(live) != set(was_live) or any(
        was_live[i] != b for i, b in live.items() if i in was_live
    )
    send_metadata = bool(metadata) or brokers_changed
    return _build(
        after,
        controller,
        batches,
        metadata if send_metadata else None,
        started,
        started,
        deleting,
    )


def plan_failover(
    image: MetadataImage, controller: ControllerIdentity, *, deleting: Collection[str] = ()
) -> dict[int, BrokerRequests]:
    """What a newly elected controller sends: a FULL LeaderAndIsr and a full UpdateMetadata to
    every live broker (topics in `deleting` left out of the LeaderAndIsr, leader -2)."""
    live = _live(image)
    batches: dict[int, _Batch] = {}
    for topic_id, topic in image.topics.by_id.items():
        if topic_id in deleting:
            continue
        for pid, part in topic.partitions.items():
            for r in part.replicas:
                if r in live:
                    batches.setdefault(r, _Batch()).leader_and_isr[(topic.name, topic_id, pid)] = (
                        _lai_state(pid, part, controller.controller_epoch, False)
                    )
    return _build(image, controller, batches, None, live, live, deleting)


def plan_topic_deletion(
    image: MetadataImage,
    controller: ControllerIdentity,
    *,
    newly_queued: Collection[str],
    stop_replicas: Mapping[int, Iterable[tuple[str, str, int]]],
) -> dict[int, BrokerRequests]:
    """A deletion step's requests (Kafka's onTopicDeletion / onReplicaDeletion): UpdateMetadata
    with leader -2 for the partitions of the `newly_queued` topics to every live broker, and
    StopReplica(delete_partition=true, leader epoch -2) per broker for `stop_replicas`
    ((topic name, topic id, partition) each)."""
    live = _live(image)
    epoch = controller.controller_epoch
    metadata: dict[_Key, UpdateMetadataPartitionState] = {}
    for topic_id in newly_queued:
        topic = image.topics.by_id.get(topic_id)
        if topic is None:
            continue
        for pid, part in topic.partitions.items():
            metadata[(topic.name, topic_id, pid)] = _um_state(
                pid, _during_delete(part), epoch, live
            )
    batches: dict[int, _Batch] = {}
    for broker_id, targets in stop_replicas.items():
        for name, topic_id, pid in targets:
            batches.setdefault(broker_id, _Batch()).stop[(name, topic_id, pid)] = (
                StopReplicaPartitionState(
                    partition_index=pid, leader_epoch=EPOCH_DURING_DELETE, delete_partition=True
                )
            )
    return _build(image, controller, batches, metadata or None, ())


def coalesce(queued: Sequence[Request]) -> tuple[list[Request], int]:
    """What a broker's channel sends next when several requests wait: the longest prefix of
    `queued` made of incremental LeaderAndIsr and UpdateMetadata of one controller epoch and
    broker epoch, as one LeaderAndIsr then one UpdateMetadata (a partition named twice keeps
    its later state; the live brokers are the last request's), and how many requests of
    `queued` that covers (at least the first). A large change is propagated batch by batch
    (the driver's commit hooks); a broker slower than the batches then gets what piled up in
    one round trip, not one per batch. A FULL LeaderAndIsr, a StopReplica or another epoch
    ends the prefix: they keep their place."""
    first = queued[0]
    taken = 0
    lais: list[LeaderAndIsrRequest] = []
    ums: list[UpdateMetadataRequest] = []
    for request in queued:
        if not _coalescible(request, first):
            break
        (lais if isinstance(request, LeaderAndIsrRequest) else ums).append(request)  # type: ignore[arg-type]
        taken += 1
    if taken <= 1:
        return [first], 1
    out: list[Request] = []
    if lais:
        out.append(_merged_leader_and_isr(lais))
    if ums:
        out.append(_merged_update_metadata(ums))
    return out, taken


def _coalescible(request: Request, first: Request) -> bool:
    if isinstance(request, LeaderAndIsrRequest):
        if request.type != LeaderAndIsrType.INCREMENTAL:
            return False
    elif not isinstance(request, UpdateMetadataRequest):
        return False
    epochs = (request.controller_id, request.controller_epoch, request.broker_epoch)  # type: ignore[attr-defined]
    return epochs == (first.controller_id, first.controller_epoch, first.broker_epoch)  # type: ignore[attr-defined]


def _merged_topics(
    states: Iterable[tuple[str, str, Iterable[Any]]],
) -> dict[tuple[str, str], dict[int, Any]]:
    merged: dict[tuple[str, str], dict[int, Any]] = {}
    for name, topic_id, partitions in states:
        into = merged.setdefault((name, topic_id), {})
        for p in partitions:
            into[p.partition_index] = p
    return merged


def _merged_leader_and_isr(requests: Sequence[LeaderAndIsrRequest]) -> LeaderAndIsrRequest:
    topics = _merged_topics(
        (t.topic_name, t.topic_id, t.partition_states) for r in requests for t in r.topic_states
    )
    leaders = {lead.broker_id: lead for r in requests for lead in r.live_leaders}
    return replace(
        requests[-1],
        topic_states=tuple(
            LeaderAndIsrTopicState(topic_name=n, topic_id=i, partition_states=tuple(ps.values()))
            for (n, i), ps in topics.items()
        ),
        live_leaders=tuple(leaders.values()),
    )


def _merged_update_metadata(requests: Sequence[UpdateMetadataRequest]) -> UpdateMetadataRequest:
    topics = _merged_topics(
        (t.topic_name, t.topic_id, t.partition_states) for r in requests for t in r.topic_states
    )
    return replace(
        requests[-1],
        topic_states=tuple(
            UpdateMetadataTopicState(topic_name=n, topic_id=i, partition_states=tuple(ps.values()))
            for (n, i), ps in topics.items()
        ),
    )
