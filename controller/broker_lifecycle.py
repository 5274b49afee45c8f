"""Brokers coming and going: Kafka's BrokerChange handling and ControlledShutdown (ZK mode).

`broker_change` takes the brokers registered right now (ZK: the children of /brokers/ids with
their znodes) and writes what changed: UnregisterBrokerRecord for a broker that went away,
RegisterBrokerRecord (unfenced) for one that appeared, both for one that came back with a new
epoch before its old session was noticed to end (Kafka's bounced brokers), UnfenceBrokerRecord
for a fenced registration that is up again. Then, as onBrokerFailure / onBrokerStartup:
partitions led by a broker that went away are re-elected (clean, or unclean when the topic's
unclean.leader.election.enable is true), the brokers that went away leave every ISR (never
emptying one: the last member stays, leaderless), and once the new brokers count as live every
partition still without a live leader gets an election.

`controlled_shutdown` marks the broker as shutting down (a RegisterBrokerRecord with the same
epoch and in_controlled_shutdown=true: the record set has no BrokerRegistrationChangeRecord
yet), moves leadership of its partitions with more than one replica to the first live in-sync
replica not shutting down (Kafka's controlled-shutdown election; when there is none the broker
keeps leading), takes it out of the ISR of the partitions it follows, and answers with the
partitions it still leads (the broker retries while there are some).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from controller.configs import unclean_leader_election_enabled
from controller.context import ControllerContext
from controller.election import controlled_shutdown_leader
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import (
    Liveness,
    PartitionState,
    ReplicaState,
    StateChange,
    StateChangeLog,
    partition_state,
    replica_state,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)
from protocol.metadata.image import MetadataImage, PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from protocol.metadata.topic_ids import ZERO_UUID

PartitionKey = tuple[str, int]
"""(topic id, partition id)."""


def iter_partitions(
    image: MetadataImage,
) -> Iterator[tuple[str, str, int, PartitionRegistration]]:
    """(topic name, topic id, partition id, registration) for every partition, by name."""
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        for pid in sorted(topic.partitions):
            yield name, topic.topic_id, pid, topic.partitions[pid]


def election_for(state: ControllerState, topic: str, ctx: ControllerContext) -> Election:
    """ONLINE, or UNCLEAN when the topic allows unclean leader election."""
    if unclean_leader_election_enabled(state, topic, ctx):
        return Election.UNCLEAN
    return Election.ONLINE


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A broker registered right now (ZK: one /brokers/ids/<id> znode)."""

    broker_id: int
    epoch: int
    """Its broker epoch (ZK: the czxid of its registration znode)."""
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    incarnation_id: str = ZERO_UUID


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The set of registered brokers changed (ZK: the /brokers/ids child watch fired)."""

    brokers: tuple[LiveBroker, ...]


@dataclass(frozen=True, slots=True)
class BrokerChangeResponse:
    new_broker_ids: tuple[int, ...] = ()
    dead_broker_ids: tuple[int, ...] = ()
    bounced_broker_ids: tuple[int, ...] = ()
    error_code: int = 0
    error_message: str | None = None


class _Changes:
    """Partition changes of one event, applied to a scratch copy so later steps see them."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.records: list[MetadataRecord] = []
        self.current: dict[PartitionKey, PartitionRegistration] = {}
        self.moved: set[PartitionKey] = set()
        """Partitions one of the records gives a new leader."""

    def partitions(self) -> Iterator[tuple[str, str, int, PartitionRegistration]]:
        for name, topic_id, pid, part in iter_partitions(self.image):
            yield name, topic_id, pid, self.current.get((topic_id, pid), part)

    def add(self, topic_id: str, pid: int, part: PartitionRegistration, record: object) -> None:
        if isinstance(record, PartitionChangeRecord):
            self.records.append(record)
            self.current[(topic_id, pid)] = part.merge(record)
            if record.leader not in (NO_LEADER_CHANGE, part.leader):
                self.moved.add((topic_id, pid))

    def elections_first(self) -> list[MetadataRecord]:
        """The records, those of partitions that get a new leader first (each partition's
        own records stay in their order): the controller appends a large change in batches
        and propagates each (Kafka's onBrokerFailure elects, then takes replicas offline),
        and a partition without its leader accepts nothing, where one with a member too
        many in its ISR still serves."""
        by_partition: dict[PartitionKey, list[PartitionChangeRecord]] = {}
        for record in self.records:
            assert isinstance(record, PartitionChangeRecord)
            by_partition.setdefault((record.topic_id, record.partition_id), []).append(record)
        moved = [rs for key, rs in by_partition.items() if key in self.moved]
        kept = [rs for key, rs in by_partition.items() if key not in self.moved]
        return [r for rs in (*moved, *kept) for r in rs]


def _reelect(
    state: ControllerState,
    ctx: ControllerContext,
    changes: _Changes,
    gone: Callable[[int], bool],
    live: Callable[[int], bool],
    up: Callable[[int], bool],
) -> None:
    """Take the replicas for which `gone` holds out of every ISR and elect where the leader is
    not up (live or shutting down). A shutting-down leader that is not gone may stay."""
    for name, topic_id, pid, part in changes.partitions():
        touched = any(gone(r) for r in part.isr) or gone(part.leader)
        if not touched and up(part.leader):
            continue
        leader = part.leader

        def acceptable(r: int, leader: int = leader) -> bool:
            return live(r) or (r == leader and up(r))

        builder = PartitionChangeBuilder(part, topic_id, pid, acceptable)
        # As leaderForOffline: the ISR keeps its members that are up (unless none is).
        builder.set_target_isr([r for r in part.isr if not gone(r) and up(r)])
        builder.set_election(election_for(state, name, ctx))
        changes.add(topic_id, pid, part, builder.build())


def broker_change(
    state: ControllerState, request: BrokerChange, ctx: ControllerContext
) -> ControllerResult[BrokerChangeResponse]:
    dupes = sorted(i for i, n in Counter(b.broker_id for b in request.brokers).items() if n > 1)
    if dupes:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker ids listed twice: {dupes}.")
    image = state.image
    registered = image.cluster.brokers
    given = {b.broker_id: b for b in request.brokers}
    dead = sorted(set(registered) - set(given))
    new = sorted(set(given) - set(registered))
    bounced = sorted(i for i in given if i in registered and given[i].epoch != registered[i].epoch)
    records: list[MetadataRecord] = []
    for broker_id in (*dead, *bounced):
        records.append(
            UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registered[broker_id].epoch)
        )
    for broker_id in sorted({*new, *bounced}):
        b = given[broker_id]
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=b.incarnation_id,
                broker_epoch=b.epoch,
                endpoints=b.endpoints,
                rack=b.rack,
                fenced=False,
            )
        )
    for broker_id in sorted(given):
        reg = registered.get(broker_id)
        if reg is not None and reg.fenced and broker_id not in bounced:
            records.append(UnfenceBrokerRecord(id=broker_id, epoch=reg.epoch))
    shutting_down = {
        i
        for i, reg in registered.items()
        if reg.in_controlled_shutdown and i in given and i not in bounced
    }
    up_after = set(given)
    live_after = up_after - shutting_down
    bounced_set = set(bounced)

    def gone(r: int) -> bool:
        # Brokers that went away, bounced ones, and any replica not registered at all: a broker
        # that died before this controller loaded leaves ISRs too (as Kafka's replica state
        # machine takes replicas on dead brokers offline at controller start-up).
        return r >= 0 and (r in bounced_set or r not in up_after)

    changes = _Changes(image)
    # onBrokerFailure: the brokers that went away are not candidates, not even bounced ones.
    _reelect(
        state,
        ctx,
        changes,
        gone,
        live=lambda r: r in live_after and not gone(r),
        up=lambda r: r in up_after and not gone(r),
    )
    if new or bounced:
        # onBrokerStartup: partitions still without a leader may get one on the new brokers.
        _reelect(
            state,
            ctx,
            changes,
            lambda r: False,
            live=live_after.__contains__,
            up=up_after.__contains__,
        )
    state_changes = _broker_change_states(
        changes,
        Liveness.from_image(image),
        Liveness(frozenset(up_after), frozenset(shutting_down)),
        gone,
        went_away={*dead, *bounced},
        came_up={*new, *bounced},
    )
    return ControllerResult(
        records=records + changes.elections_first(),
        response=BrokerChangeResponse(
            new_broker_ids=tuple(new),
            dead_broker_ids=tuple(dead),
            bounced_broker_ids=tuple(bounced),
        ),
        state_changes=state_changes,
        atomic=False,
    )


def _broker_change_states(
    changes: _Changes,
    before: Liveness,
    after: Liveness,
    gone: Callable[[int], bool],
    *,
    went_away: set[int],
    came_up: set[int],
) -> list[StateChange]:
    """The state machines' view of a BrokerChange, per partition in Kafka's order:
    onBrokerFailure moves partitions whose leader went away to OfflinePartition and the
    replicas on brokers that went away to OfflineReplica; onBrokerStartup moves the replicas
    on brokers that came up (bounced ones: after going Offline) to OnlineReplica; then
    triggerOnlinePartitionStateChange moves every New or Offline partition to OnlinePartition,
    which fails (the partition stays where it was) when the election found no leader."""
    sm = StateChangeLog()
    for name, topic_id, pid, old in iter_partitions(changes.image):
        state = partition_state(old, before)
        if state is PartitionState.ONLINE and gone(old.leader):
            state = sm.partition(name, pid, state, PartitionState.OFFLINE)
        if went_away or came_up:
            for r in old.replicas:
                if r in went_away:
                    sm.replica(name, pid, r, replica_state(old, r, before), ReplicaState.OFFLINE)
                if r in came_up:
                    current = (
                        ReplicaState.OFFLINE if r in went_away else replica_state(old, r, before)
                    )
                    sm.replica(name, pid, r, current, ReplicaState.ONLINE)
        if state is PartitionState.NEW or state is PartitionState.OFFLINE:
            new = changes.current.get((topic_id, pid), old)
            sm.partition(name, pid, state, PartitionState.ONLINE, partition_state(new, after))
    return sm.changes


def controlled_shutdown(
    state: ControllerState, request: ControlledShutdownRequest, ctx: ControllerContext
) -> ControllerResult[ControlledShutdownResponse]:
    broker_id = request.broker_id
    reg = state.image.cluster.broker(broker_id)
    if reg is None or reg.fenced:
        raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
    if request.broker_epoch != reg.epoch:
        # Kafka lets -1 through for brokers older than 2.2; every trioka broker sends its
        # epoch, and without it anyone could move a broker's leaderships away. The current
        # epoch is never in the message: it is what a forged request would need.
        raise KafkaError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Received controlled shutdown request from broker epoch {request.broker_epoch} "
            f"for broker {broker_id}, which is not its current registration.",
        )
    records: list[MetadataRecord] = []
    if not reg.in_controlled_shutdown:
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=reg.incarnation_id,
                broker_epoch=reg.epoch,
                endpoints=reg.endpoints,
                rack=reg.rack,
                fenced=reg.fenced,
                in_controlled_shutdown=True,
            )
        )
    image = state.image
    before = Liveness.from_image(image)
    liveness = replace(before, shutting_down=before.shutting_down | {broker_id})
    changes = _Changes(image)
    sm = StateChangeLog()
    remaining: list[RemainingPartition] = []
    for name, topic_id, pid, part in changes.partitions():
        if broker_id not in part.replicas:
            continue
        if len(part.replicas) > 1:
            builder: PartitionChangeBuilder | None = None
            leads = part.leader == broker_id
            if part.leader == broker_id:
                new_leader = controlled_shutdown_leader(
                    part.replicas,
                    part.isr,
                    liveness.is_live_or_shutting_down,
                    liveness.shutting_down,
                )
                if new_leader != NO_LEADER:
                    builder = PartitionChangeBuilder(part, topic_id, pid, liveness.is_live)
                    builder.set_target_isr([r for r in part.isr if r not in liveness.shutting_down])
            elif broker_id in part.isr:
                leader = part.leader

                def acceptable(r: int, leader: int = leader) -> bool:
                    return r == leader or liveness.is_live(r)

                builder = PartitionChangeBuilder(part, topic_id, pid, acceptable)
                builder.set_target_isr([r for r in part.isr if r != broker_id])
            if builder is not None:
                changes.add(topic_id, pid, part, builder.build())
            # Kafka's doControlledShutdown: led partitions -> OnlinePartition (controlled
            # shutdown election; failed when nobody else can lead), followed ones: the
            # broker's replica -> OfflineReplica.
            after = changes.current.get((topic_id, pid), part)
            if leads:
                sm.partition(
                    name,
                    pid,
                    partition_state(part, before),
                    PartitionState.ONLINE,
                    partition_state(after, liveness),
                    failed=after.leader == broker_id,
                )
            elif part.leader != NO_LEADER:
                current = replica_state(part, broker_id, before)
                sm.replica(name, pid, broker_id, current, ReplicaState.OFFLINE)
        if changes.current.get((topic_id, pid), part).leader == broker_id:
            remaining.append(RemainingPartition(topic_name=name, partition_index=pid))
    return ControllerResult(
        records=records + changes.records,
        response=ControlledShutdownResponse(remaining_partitions=tuple(remaining)),
        state_changes=sm.changes,
    )
