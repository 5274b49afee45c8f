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
from client.admin_groups import GroupDescription, GroupListing, MemberDescription
from client.consumer import Consumer, OffsetAndTimestamp
from client.consumer_coordinator import ConsumerRebalanceListener
from client.errors import (
    ClientClosedError,
    CommitFailedError,
    DivergentOffset,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogTruncationError,
    NoOffsetForPartitionError,
    RebalanceInProgressError,
)
from client.fetched_records import ConsumerRecord
from client.futures import RecordFuture, RecordMetadata
from client.group_offsets import OffsetAndMetadata
from client.producer import Producer
from client.sync import SyncAdmin, SyncConsumer, SyncProducer
from protocol.errors import KafkaError
from protocol.names import TopicPartition

__all__ = [
    "Admin",
    "AlterConfigOp",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigResource",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "CreatedTopic",
    "DivergentOffset",
    "ElectionType",
    "GroupDescription",
    "GroupListing",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogTruncationError",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionReassignment",
    "Producer",
    "RebalanceInProgressError",
    "RecordFuture",
    "RecordMetadata",
    "ResourceType",
    "SyncAdmin",
    "SyncConsumer",
    "SyncProducer",
    "TopicDescription",
    "TopicPartition",
]
