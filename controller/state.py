"""ControllerState: the controller's view of the cluster, changed only by replaying records.

The active controller and standbys build it the same way, from committed records in offset
order, so a standby that takes over has exactly the state the old active one had. It wraps a
MetadataImage (the same structure brokers use) plus the indexes operations need to stay fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import (
    MetadataImage,
    MetadataProvenance,
    MetadataReplayError,
    TopicImage,
)
from protocol.metadata.records import MetadataRecord


def unify_collision_chars(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


class ControllerState:
    """Replayed state. Operations read it; only `replay` changes it."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self._image = image if image is not None else MetadataImage.empty()
        self._collisions: dict[str, set[str]] = {}
        for name in self._image.topics.by_name:
            self._index(name)

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def last_applied_offset(self) -> int:
        """Offset of the last record replayed, -1 before any."""
        return self._image.provenance.last_offset

    @property
    def next_offset(self) -> int:
        """Where the next record appended by the single writer will land."""
        return self._image.provenance.last_offset + 1

    def replay(self, batch: Iterable[tuple[int, MetadataRecord]], epoch: int = -1) -> int:
        """Replay committed `(offset, record)` pairs; those at or below the last applied offset
        were replayed already and are skipped. All or nothing: a record that does not fit
        raises MetadataReplayError and leaves the state as it was. Returns how many applied."""
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

    def replay_appended(self, records: Sequence[MetadataRecord], last_offset: int) -> int:
        """Replay records the caller appended itself, ending at `last_offset`."""
        first = last_offset - len(records) + 1
        return self.replay(zip(range(first, last_offset + 1), records, strict=True))

    def _apply(self, delta: MetadataDelta) -> None:
        before = self._image
        self._image = delta.apply()
        topics = delta.topics_delta
        if topics is not None:
            for topic_id in topics.deleted_topic_ids:
                self._unindex(before.topics.by_id[topic_id].name)
            for name in topics.created_topics:
                self._index(name)

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
