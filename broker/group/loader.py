"""Folding an offsets partition's records into its groups and offsets (the pure half of
Kafka's GroupMetadataManager.doLoadGroupsAndOffsets): the latest record per key wins, a
tombstone deletes. A record this broker cannot read is reported and skipped.

What a compacted partition may hold, as in Kafka: offsets after their group's tombstone (a
group tombstone deletes the group's metadata only; its offsets have tombstones of their own,
and offsets committed later make an Empty group again), a group record after its offsets,
offsets of a group without any metadata record (an offsets-only group: loaded Empty), gaps and
empty batches. A record of a group that hashes to another partition cannot be written by a
coordinator; it is reported once per group and skipped, since this partition's unload would
never drop such a group."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.group.effects import LoadedPartition
from broker.group.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetsRecordError,
    OffsetValue,
    decode_key,
    decode_value,
)
from protocol.names import TopicPartition


class PartitionLoader:
    def __init__(
        self,
        on_bad_record: Callable[[str], None] = lambda problem: None,
        owns_group: Callable[[str], bool] = lambda group_id: True,
    ) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.groups: dict[str, GroupValue] = {}
        self.removed_groups: set[str] = set()
        self.on_bad_record = on_bad_record
        self.owns_group = owns_group
        self.foreign_groups: set[str] = set()

    def feed(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        for raw_key, raw_value in records:
            if raw_key is None:
                self.on_bad_record("a record without a key")
                continue
            try:
                key = decode_key(raw_key)
                value = decode_value(key, raw_value)
            except OffsetsRecordError as exc:
                self.on_bad_record(str(exc))
                continue
            if not self.owns_group(key.group_id):
                if key.group_id not in self.foreign_groups:
                    self.foreign_groups.add(key.group_id)
                    self.on_bad_record(
                        f"group {key.group_id!r} belongs to another offsets partition"
                    )
                continue
            self._apply(key, value)

    def _apply(self, key: OffsetKey | GroupKey, value: object) -> None:
        if isinstance(key, OffsetKey):
            tp = TopicPartition(key.topic, key.partition)
            group = self.offsets.setdefault(key.group_id, {})
            if value is None:
                group.pop(tp, None)
            else:
                assert isinstance(value, OffsetValue)
                group[tp] = value
            return
        if value is None:
            self.groups.pop(key.group_id, None)
            self.removed_groups.add(key.group_id)
        else:
            assert isinstance(value, GroupValue)
            self.groups[key.group_id] = value
            self.removed_groups.discard(key.group_id)

    def result(self) -> LoadedPartition:
        offsets = {g: o for g, o in self.offsets.items() if o}
        return LoadedPartition(offsets=offsets, groups=dict(self.groups))
