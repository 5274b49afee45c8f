"""ControllerState: the controller's view of the cluster, changed only by replaying records.

The active controller and standbys build it the same way, from records in offset order, so a
standby that takes over has exactly the state the old active one had. It wraps a MetadataImage
(the same structure brokers use) plus the indexes operations need to stay fast.

Pipelined writes (KRaft's QuorumController with its SnapshotRegistry): the active controller
replays its own records as soon as they are *appended* (`replay_pending`), so the next
operation sees them before they commit. Images are immutable, so there are two: `image`
(everything replayed, uncommitted appends included: what operations read) and
`committed_image` (what the quorum committed). Each pending append keeps its records and the
image right after it; `mark_committed(offset)` (or a committed replay reaching it) moves
`committed_image` forward, `revert()` drops every pending append (leadership lost).

Committed records (`replay`) that land on offsets already replayed optimistically are compared
with what was appended there: equal records are only a commit; a different record (another
leader's entry replaced ours) reverts to the committed image first and replays the committed
ones. Standbys never append, so for them both images are the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import (
    MetadataImage,
    MetadataProvenance,
    MetadataReplayError,
    PartitionRegistration,
    TopicImage,
)
from protocol.metadata.records import NO_LEADER, MetadataRecord, NoOpRecord


def unify_collision_chars(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


@dataclass(frozen=True, slots=True)
class _PendingAppend:
    """Records replayed at append time, not known to be committed yet."""

    first_offset: int
    records: tuple[MetadataRecord, ...]
    image: MetadataImage
    """The image right after them."""

    @property
    def last_offset(self) -> int:
        return self.first_offset + len(self.records) - 1


class ControllerState:
    """Replayed state. Operations read it; only `replay`, `replay_appended`,
    `mark_committed` and `revert` change it."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self._image = image if image is not None else MetadataImage.empty()
        self._committed_image = self._image
        self._pending: deque[_PendingAppend] = deque()
        self._collisions: dict[str, set[str]] = {}
        self._by_broker: dict[int, set[tuple[str, int]]] = {}
        """Broker id -> the partitions it is a replica of (or in the ISR of, or leads)."""
        self._leaderless: set[tuple[str, int]] = set()
        self._reindex()

    @property
    def image(self) -> MetadataImage:
        """Everything replayed, appended-but-uncommitted records included."""
        return self._image

    @property
    def committed_image(self) -> MetadataImage:
        """The image as of the last committed offset (snapshots and reverts use it)."""
        return self._committed_image

    @property
    def committed_offset(self) -> int:
        """The last committed offset replayed, -1 before any."""
        return self._committed_image.provenance.last_offset

    @property
    def pending_appends(self) -> int:
        """How many appends are replayed but not committed yet."""
        return len(self._pending)

    @property
    def last_applied_offset(self) -> int:
        """Offset of the last record replayed, -1 before any."""
        return self._image.provenance.last_offset

    @property
    def next_offset(self) -> int:
        """Where the next record appended by the single writer will land."""
        return self._image.provenance.last_offset + 1

    def replay(self, batch: Iterable[tuple[int, MetadataRecord]], epoch: int = -1) -> int:
        """Replay committed `(offset, record)` pairs; those at or below the committed offset
        were replayed already and are skipped, those on a pending append's offsets commit it
        (or, if they differ, revert it first). All or nothing: a record that does not fit
        raises MetadataReplayError and leaves the state as it was. Returns how many applied."""
        fresh = [(o, r) for o, r in batch if o > self.committed_offset]
        if not fresh:
            return 0
        if self._pending:
            if not self._matches_pending(fresh):
                self.revert()
            else:
                pending_end = self._pending[-1].last_offset
                self.mark_committed(min(fresh[-1][0], pending_end))
                fresh = [(o, r) for o, r in fresh if o > pending_end]
                if not fresh:
                    return 0
        applied = self._replay_onto_image(fresh, epoch)
        self._committed_image = self._image
        return applied

    def replay_appended(self, records: Sequence[MetadataRecord], last_offset: int) -> int:
        """Replay committed records the caller appended itself, ending at `last_offset`."""
        first = last_offset - len(records) + 1
        return self.replay(zip(range(first, last_offset + 1), records, strict=True))

    def replay_pending(self, records: Sequence[MetadataRecord], last_offset: int) -> int:
        """Replay records the caller appended itself, ending at `last_offset`, as pending
        until `mark_committed` (or the committed replay) reaches them. Offsets replayed
        already (a log that delivers to its listeners during the append) are skipped; a hole
        before them (a Raft control entry) is replayed as NoOpRecords."""
        first = last_offset - len(records) + 1
        pairs = [
            (o, r)
            for o, r in zip(range(first, last_offset + 1), records, strict=True)
            if o >= self.next_offset
        ]
        if not pairs:
            return 0
        holes = [(o, NoOpRecord()) for o in range(self.next_offset, pairs[0][0])]
        pairs = holes + pairs
        applied = self._replay_onto_image(pairs, -1)
        self._pending.append(_PendingAppend(pairs[0][0], tuple(r for _, r in pairs), self._image))
        return applied - len(holes)

    def mark_committed(self, offset: int) -> None:
        """Everything up to `offset` (replayed already) is committed."""
        while self._pending and self._pending[0].last_offset <= offset:
            self._committed_image = self._pending.popleft().image
        head = self._pending[0] if self._pending else None
        if head is not None and head.first_offset <= offset:
            # Raft commits entry by entry: part of one append committed. Rebuild that image
            # (rare: the leader's high watermark stopped inside a batch).
            done = head.records[: offset - head.first_offset + 1]
            delta = MetadataDelta(self._committed_image)
            for i, record in enumerate(done):
                delta.replay(record, offset=head.first_offset + i)
            self._committed_image = delta.apply()
            self._pending[0] = _PendingAppend(offset + 1, head.records[len(done) :], head.image)

    def revert(self) -> None:
        """Drop every pending append: back to the committed image (leadership lost)."""
        if not self._pending and self._image is self._committed_image:
            return
        self._pending.clear()
        self._image = self._committed_image
        self._reindex()

    def _matches_pending(self, pairs: Sequence[tuple[int, MetadataRecord]]) -> bool:
        by_offset = {p.first_offset + i: r for p in self._pending for i, r in enumerate(p.records)}
        end = self._pending[-1].last_offset
        return all(by_offset.get(o) == r for o, r in pairs if o <= end)

    def _replay_onto_image(self, batch: Iterable[tuple[int, MetadataRecord]], epoch: int) -> int:
        expected = self.next_offset
        delta: MetadataDelta | None = None
        applied = 0
        for offset, record in batch:
            if offset < expected:
                continue
            if offset != expected:
                raise MetadataReplayError(
                    f"metadata record at offset {offset} replayed after offset {expected - 1}: "
                    "records must be replayed in order without gaps"
                )
            if delta is None:
                delta = MetadataDelta(self._image)
            try:
                delta.replay(record, offset=offset, epoch=epoch)
            except MetadataReplayError as exc:
                raise MetadataReplayError(f"offset {offset}: {exc}") from None
            expected += 1
            applied += 1
        if delta is not None:
            self._apply(delta)
        return applied

    def _apply(self, delta: MetadataDelta) -> None:
        before = self._image
        self._image = delta.apply()
        topics = delta.topics_delta
        if topics is not None:
            for topic_id in topics.deleted_topic_ids:
                topic = before.topics.by_id[topic_id]
                self._unindex(topic.name)
                for pid, part in topic.partitions.items():
                    self._unindex_partition((topic.name, pid), part)
            for name in topics.created_topics:
                self._index(name)
            for topic_id, changed in topics.changed_topics.items():
                if topic_id in topics.deleted_topic_ids:
                    continue
                old = changed.image.partitions
                for pid, part in changed.partition_changes.items():
                    key = (changed.name, pid)
                    previous = old.get(pid)
                    if previous is not None:
                        self._unindex_partition(key, previous)
                    self._index_partition(key, part)

    def _reindex(self) -> None:
        self._collisions = {}
        self._by_broker = {}
        self._leaderless = set()
        for name, topic in self._image.topics.by_name.items():
            self._index(name)
            for pid, part in topic.partitions.items():
                self._index_partition((name, pid), part)

    def _index_partition(self, key: tuple[str, int], part: PartitionRegistration) -> None:
        for broker_id in _members(part):
            self._by_broker.setdefault(broker_id, set()).add(key)
        if part.leader == NO_LEADER:
            self._leaderless.add(key)

    def _unindex_partition(self, key: tuple[str, int], part: PartitionRegistration) -> None:
        for broker_id in _members(part):
            keys = self._by_broker.get(broker_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_broker[broker_id]
        self._leaderless.discard(key)

    def _index(self, name: str) -> None:
        if has_collision_chars(name):
            self._collisions.setdefault(unify_collision_chars(name), set()).add(name)

    def _unindex(self, name: str) -> None:
        if has_collision_chars(name):
            key = unify_collision_chars(name)
            names = self._collisions.get(key)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._collisions[key]

    # Queries used by operations.

    def partitions_of_brokers(self, broker_ids: Iterable[int]) -> list[tuple[str, int]]:
        """(topic name, partition id) of every partition one of `broker_ids` is a replica
        of, in the ISR of or leads, by name then id (KRaft's BrokersToIsrs): what a broker's
        fencing or shutdown changes, without walking every partition of the cluster."""
        keys: set[tuple[str, int]] = set()
        for broker_id in broker_ids:
            keys |= self._by_broker.get(broker_id, set())
        return sorted(keys)

    def leaderless_partitions(self) -> list[tuple[str, int]]:
        """(topic name, partition id) of every partition without a leader, by name then id."""
        return sorted(self._leaderless)

    def topic(self, name: str) -> TopicImage | None:
        return self._image.topics.by_name.get(name)

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic other than `name` that collides with it ('.' vs '_')."""
        if not has_collision_chars(name):
            return None
        others = self._collisions.get(unify_collision_chars(name), set()) - {name}
        return min(others) if others else None

    def usable_brokers(self) -> dict[int, str | None]:
        """Unfenced brokers not shutting down, with their racks: where replicas may go."""
        return {b.broker_id: b.rack for b in self._image.cluster.usable_brokers()}

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self._image.cluster.brokers

    def is_usable(self, broker_id: int) -> bool:
        return self._image.cluster.is_usable(broker_id)

    @property
    def provenance(self) -> MetadataProvenance:
        return self._image.provenance


def _members(part: PartitionRegistration) -> set[int]:
    members = {*part.replicas, *part.isr}
    if part.leader >= 0:
        members.add(part.leader)
    return members
