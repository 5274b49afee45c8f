"""Topic deletion in Kafka's ZK-mode order (Kafka's TopicDeletionManager), pure.

A deletion has three phases: the topic is *queued* (ZK mode: /admin/delete_topics/<t>), every
replica gets StopReplica(delete_partition=true) and must answer, and only when every replica is
ReplicaDeletionSuccessful is the topic removed from the metadata (the one RemoveTopicRecord the
controller's DeleteTopics operation produces; in ZooKeeper that record deletes the topic's
znodes). The Raft backend needs none of this: brokers delete from the metadata log.

`TopicDeletionManager` keeps what is not in the records (which replicas answered), keyed by
topic id so that a topic recreated under the same name is never confused with the old one.
Its inputs are Kafka's events and each returns a `DeletionStep` for the driver to carry out:

- `enqueue(image, names)`: enqueueTopicsForDeletion. Unknown names are ignored (the driver
  removes their markers, as Kafka's TopicDeletionHandler does).
- `brokers_changed(image, dead, started)`: replicas on a dead (or bounced) broker become
  ReplicaDeletionIneligible and their topic ineligible (failReplicaDeletion via
  onReplicasBecomeOffline); a topic with a replica on a broker that came up is eligible again
  (onBrokerStartup -> resumeDeletionForTopics).
- `stop_replica_answered(broker_id, answers)`: per replica, NONE -> ReplicaDeletionSuccessful,
  an error -> ReplicaDeletionIneligible and the topic ineligible (Kafka's
  TopicDeletionStopReplicaResponseReceived). As in Kafka, a failed replica is retried when its
  topic becomes eligible again (a broker hosting it starts), not in a tight loop.
- `resume(image, live)`: resumeDeletions: a topic whose replicas all succeeded is *complete*
  (the driver commits its RemoveTopicRecord, then calls `forget`); Ineligible replicas go back
  to Offline (retryDeletionForIneligibleReplicas); an eligible topic (queued, not ineligible,
  nothing in ReplicaDeletionStarted) has its Offline replicas on live brokers moved to
  ReplicaDeletionStarted with a StopReplica each, and those on dead brokers to Ineligible.

While queued, a topic's partitions get no LeaderAndIsr and brokers see them with leader -2
(LeaderDuringDelete): `deleting_ids()` is what controller.propagation filters by.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from controller.state_machines import ReplicaState, TopicDeletionReplicas
from protocol.errors import ErrorCode
from protocol.metadata.image import MetadataImage

ReplicaKey = tuple[str, int, int]
"""(topic id, partition, broker id)."""


@dataclass(frozen=True, slots=True)
class StopReplicaTarget:
    """One StopReplica(delete_partition=true) to send."""

    topic_name: str
    topic_id: str
    partition: int


@dataclass(frozen=True, slots=True)
class DeletionStep:
    """What the driver does after an event: send these StopReplicas, tell every live broker
    the newly queued topics are being deleted, commit the removal of the completed topics."""

    stop_replicas: Mapping[int, tuple[StopReplicaTarget, ...]] = field(default_factory=dict)
    """Broker id -> the replicas to stop and delete there."""
    newly_queued: tuple[str, ...] = ()
    """Topic ids queued by this event (UpdateMetadata with leader -2 to every live broker)."""
    complete: tuple[str, ...] = ()
    """Topic ids whose replicas are all deleted: commit their RemoveTopicRecord now."""

    @property
    def empty(self) -> bool:
        return not (self.stop_replicas or self.newly_queued or self.complete)


@dataclass
class _Topic:
    name: str
    replicas: TopicDeletionReplicas
    ineligible: bool = False
    completing: bool = False


class TopicDeletionManager:
    """The deletion state of every queued topic (one controller term; rebuilt on failover)."""

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}

    # -- queries --------------------------------------------------------------------------------

    def deleting_ids(self) -> frozenset[str]:
        return frozenset(self._topics)

    def is_queued(self, name: str) -> bool:
        return any(t.name == name for t in self._topics.values())

    def queued_names(self) -> list[str]:
        return sorted(t.name for t in self._topics.values())

    def is_ineligible(self, topic_id: str) -> bool:
        topic = self._topics.get(topic_id)
        return topic is not None and topic.ineligible

    def replica_state(self, topic_id: str, partition: int, broker_id: int) -> ReplicaState:
        topic = self._topics.get(topic_id)
        if topic is None:
            return ReplicaState.NON_EXISTENT
        return topic.replicas.state(partition, broker_id)

    # -- events --------------------------------------------------------------------------------

    def enqueue(self, image: MetadataImage, names: Iterable[str]) -> list[str]:
        """Queue the named topics that exist; returns the ids newly queued."""
        added: list[str] = []
        for name in names:
            topic = image.topics.by_name.get(name)
            if topic is None or topic.topic_id in self._topics:
                continue
            self._topics[topic.topic_id] = _Topic(
                name,
                TopicDeletionReplicas(
                    (pid, r) for pid, part in topic.partitions.items() for r in part.replicas
                ),
            )
            added.append(topic.topic_id)
        return added

    def brokers_changed(self, dead: Collection[int], started: Collection[int]) -> None:
        """Dead (or bounced) brokers' replicas become Ineligible; topics with a replica on a
        broker that came up become eligible again."""
        for topic in self._topics.values():
            failed = [
                (pid, b)
                for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED)
                for pid, b in topic.replicas.in_state(state)
                if b in dead
            ]
            for pid, b in failed:
                topic.replicas.transition(pid, b, ReplicaState.DELETION_INELIGIBLE)
            if failed:
                topic.ineligible = True
        for topic in self._topics.values():
            if any(b in started for _, b in _all(topic.replicas)):
                topic.ineligible = False

    def stop_replica_answered(
        self, broker_id: int, answers: Iterable[tuple[str, int, int]]
    ) -> None:
        """`answers`: (topic id, partition, error code) of a StopReplica(delete) response.
        Only replicas waiting in ReplicaDeletionStarted move (a late answer to an earlier
        attempt changes nothing)."""
        for topic_id, partition, code in answers:
            topic = self._topics.get(topic_id)
            if topic is None:
                continue
            if topic.replicas.state(partition, broker_id) is not ReplicaState.DELETION_STARTED:
                continue
            if code == ErrorCode.NONE:
                topic.replicas.transition(partition, broker_id, ReplicaState.DELETION_SUCCESSFUL)
            else:
                topic.replicas.transition(partition, broker_id, ReplicaState.DELETION_INELIGIBLE)
                topic.ineligible = True

    def resume(
        self, image: MetadataImage, live: Collection[int], newly_queued: Iterable[str] = ()
    ) -> DeletionStep:
        """Kafka's resumeDeletions over every queued topic."""
        stops: dict[int, list[StopReplicaTarget]] = {}
        complete: list[str] = []
        for topic_id, topic in sorted(self._topics.items()):
            if topic_id not in image.topics.by_id:
                continue  # removed already; `forget` follows
            replicas = topic.replicas
            if replicas.all_successful():
                if not topic.completing:
                    topic.completing = True
                    complete.append(topic_id)
                continue
            if replicas.in_state(ReplicaState.DELETION_STARTED):
                continue  # answers pending
            for pid, b in replicas.in_state(ReplicaState.DELETION_INELIGIBLE):
                replicas.transition(pid, b, ReplicaState.OFFLINE)
            if topic.ineligible:
                continue
            for pid, b in replicas.in_state(ReplicaState.OFFLINE):
                if b in live:
                    replicas.transition(pid, b, ReplicaState.DELETION_STARTED)
                    stops.setdefault(b, []).append(StopReplicaTarget(topic.name, topic_id, pid))
                else:
                    replicas.transition(pid, b, ReplicaState.DELETION_INELIGIBLE)
                    topic.ineligible = True
            if replicas.all_successful() and not topic.completing:
                # No replica at all (or none left): nothing to wait for.
                topic.completing = True
                complete.append(topic_id)
        return DeletionStep(
            stop_replicas={b: tuple(t) for b, t in sorted(stops.items())},
            newly_queued=tuple(newly_queued),
            complete=tuple(complete),
        )

    def completion_failed(self, topic_id: str) -> None:
        """The RemoveTopicRecord did not commit: the next `resume` offers it again."""
        topic = self._topics.get(topic_id)
        if topic is not None:
            topic.completing = False

    def forget(self, topic_ids: Iterable[str]) -> None:
        """The topics are gone from the metadata (their RemoveTopicRecord committed)."""
        for topic_id in topic_ids:
            self._topics.pop(topic_id, None)

    def forget_removed(self, image: MetadataImage) -> list[str]:
        """Forget queued topics no longer in `image`; returns their ids."""
        gone = [t for t in self._topics if t not in image.topics.by_id]
        self.forget(gone)
        return gone


def _all(replicas: TopicDeletionReplicas) -> list[tuple[int, int]]:
    return [key for state in ReplicaState for key in replicas.in_state(state)]


def stop_replica_answers(
    request_topics: Iterable[tuple[str, str, Iterable[tuple[int, int, bool]]]],
    response_error: int,
    partition_errors: Iterable[tuple[str, int, int]],
) -> list[tuple[str, int, int]]:
    """(topic id, partition, error) for the delete-during-deletion partitions of a StopReplica.

    `request_topics`: (topic name, topic id, [(partition, leader epoch, delete)]) as sent;
    only partitions sent with delete and leader epoch -2 (EpochDuringDelete) are deletion
    answers. A request-level error fails them all; a partition missing from the answer failed.
    """
    errors = {(name, p): code for name, p, code in partition_errors}
    out: list[tuple[str, int, int]] = []
    for name, topic_id, partitions in request_topics:
        for pid, leader_epoch, delete in partitions:
            if not delete or leader_epoch != EPOCH_DURING_DELETE:
                continue
            if response_error:
                code = response_error
            else:
                code = errors.get((name, pid), int(ErrorCode.UNKNOWN_SERVER_ERROR))
            out.append((topic_id, pid, code))
    return out


EPOCH_DURING_DELETE = -2
"""Kafka's LeaderAndIsr.EpochDuringDelete, the leader epoch of a deletion's StopReplica."""


def liveness_change(
    before: Mapping[int, int], after: Mapping[int, int]
) -> tuple[frozenset[int], frozenset[int]]:
    """(dead, started) between two {live broker id: broker epoch} maps; a broker with a new
    epoch (bounced) is both."""
    dead = {b for b, e in before.items() if after.get(b) != e}
    started = {b for b, e in after.items() if before.get(b) != e}
    return frozenset(dead), frozenset(started)


__all__ = [
    "EPOCH_DURING_DELETE",
    "DeletionStep",
    "StopReplicaTarget",
    "TopicDeletionManager",
    "liveness_change",
    "stop_replica_answers",
]
