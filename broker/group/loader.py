"""Folding an offsets partition's records into its groups and offsets (the pure half of
Kafka's GroupMetadataManager.doLoadGroupsAndOffsets): the latest record per key wins, a
tombstone deletes. A record this broker cannot read is reported and skipped."""

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
    def __init__(self, on_bad_record: Callable[[str], None] = lambda problem: None) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.groups: dict[str, GroupValue] = {}
        self.removed_groups: set[str] = set()
        self.on_bad_record = on_bad_record

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
