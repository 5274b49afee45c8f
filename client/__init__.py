"""trioka's client library: trio Producer, Consumer and Admin, and a synchronous facade."""

from client.admin import (
    Admin,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    CreatedTopic,
    ElectionType,
    NewPartitions,
    NewTopic,
    PartitionReassignment,
    ResourceType,
    TopicDescription,
)
from client.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from client.errors import (
    ClientClosedError,
    DivergentOffset,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogTruncationError,
    NoOffsetForPartitionError,
)
from client.futures import RecordFuture, RecordMetadata
from client.producer import Producer
from client.sync import SyncAdmin, SyncConsumer, SyncProducer
from protocol.errors import KafkaError
from protocol.names import TopicPartition

__all__ = [
    "Admin",
    "AlterConfigOp",
    "ClientClosedError",
    "ConfigEntry",
    "ConfigResource",
    "Consumer",
    "ConsumerRecord",
    "CreatedTopic",
    "DivergentOffset",
    "ElectionType",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogTruncationError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "PartitionReassignment",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "ResourceType",
    "SyncAdmin",
    "SyncConsumer",
    "SyncProducer",
    "TopicDescription",
    "TopicPartition",
]
