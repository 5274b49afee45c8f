"""LogConfig: the topic configs storage applies, under Kafka's names with underscores."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.config_defs import TOPIC_CONFIGS

_D = TOPIC_CONFIGS.defaults()


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-log settings. Defaults are Kafka's (from protocol.config_defs.TOPIC_CONFIGS)."""

    cleanup_policy: tuple[str, ...] = _D["cleanup.policy"]
    retention_ms: int = _D["retention.ms"]
    retention_bytes: int = _D["retention.bytes"]
    segment_bytes: int = _D["segment.bytes"]
    segment_ms: int = _D["segment.ms"]
    segment_index_bytes: int = _D["segment.index.bytes"]
    index_interval_bytes: int = _D["index.interval.bytes"]
    max_message_bytes: int = _D["max.message.bytes"]
    min_insync_replicas: int = _D["min.insync.replicas"]
    unclean_leader_election_enable: bool = _D["unclean.leader.election.enable"]
    flush_messages: int = _D["flush.messages"]
    flush_ms: int = _D["flush.ms"]
    file_delete_delay_ms: int = _D["file.delete.delay.ms"]
    delete_retention_ms: int = _D["delete.retention.ms"]
    min_cleanable_dirty_ratio: float = _D["min.cleanable.dirty.ratio"]
    min_compaction_lag_ms: int = _D["min.compaction.lag.ms"]
    max_compaction_lag_ms: int = _D["max.compaction.lag.ms"]
    compression_type: str = _D["compression.type"]
    message_timestamp_type: str = _D["message.timestamp.type"]

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, Any]) -> LogConfig:
        """From typed values keyed by Kafka names (`TOPIC_CONFIGS.resolve(...)` output).

        Missing keys keep their defaults; keys storage does not use are ignored, so topic
        configs that only other packages read can be added without touching storage.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {}
        for name, value in configs.items():
            attr = name.replace(".", "_")
            if attr in fields:
                values[attr] = tuple(value) if attr == "cleanup_policy" else value
        return cls(**values)

    def to_topic_configs(self) -> dict[str, Any]:
        """The inverse of from_topic_configs: Kafka names -> typed values."""
        return {f.name.replace("_", "."): getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> LogConfig:
        return dataclasses.replace(self, **changes)

    @property
    def max_index_entries(self) -> int:
        """Offset-index entries a segment may hold before it rolls (8 bytes each)."""
        return max(1, self.segment_index_bytes // 8)

    @property
    def max_time_index_entries(self) -> int:
        """Time-index entries a segment may hold before it rolls (12 bytes each)."""
        return max(1, self.segment_index_bytes // 12)
