"""trioka storage: the segmented log (Kafka's layout, recovery, checkpoints, retention).

Plain synchronous file code; the broker's partitions and the Raft metadata log both use it.
"""

from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochFileCache, OffsetAndEpoch
from storage.errors import (
    CheckpointError,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogClosedError,
    MetaPropertiesError,
    UnexpectedAppendOffsetError,
)
from storage.files import FileHandleCache
from storage.log import Log
from storage.log_append import AppendInfo
from storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from storage.log_read import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ReadResult, TimestampOffset
from storage.meta_properties import MetaProperties

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AppendInfo",
    "CheckpointError",
    "FileHandleCache",
    "InconsistentTopicIdError",
    "KafkaStorageError",
    "LeaderEpochFileCache",
    "Log",
    "LogClosedError",
    "LogConfig",
    "LogManager",
    "MetaProperties",
    "MetaPropertiesError",
    "OffsetAndEpoch",
    "ReadResult",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
]
