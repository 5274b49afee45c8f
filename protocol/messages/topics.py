"""CreateTopics and DeleteTopics."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class CreatableReplicaAssignment:
    partition_index: int
    """Partition number."""
    broker_ids: tuple[int, ...]
    """Replicas, preferred leader first."""


@message
class CreatableTopicConfig:
    name: str
    """Topic config name (retention.ms, ...)."""
    value: str | None
    """Its value as a string."""


@message
class CreatableTopic:
    name: str
    """Topic name: [a-zA-Z0-9._-]{1,249}, not '.' or '..'."""
    num_partitions: int = -1
    """Partition count; -1 for num.partitions (or with manual assignments)."""
    replication_factor: int = -1
    """Replicas per partition; -1 for default.replication.factor."""
    assignments: tuple[CreatableReplicaAssignment, ...] = ()
    """Manual replica assignment; when given, num_partitions and replication_factor are -1."""
    configs: tuple[CreatableTopicConfig, ...] = ()
    """Topic config overrides."""


@message
class CreatableTopicResult:
    name: str
    """Topic name."""
    error_code: int
    """TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    topic_id: str = ""
    """The new topic's id."""
    num_partitions: int = -1
    """Partitions created."""
    replication_factor: int = -1
    """Replication factor used."""


@message
class CreateTopicsResponse(Response):
    topics: tuple[CreatableTopicResult, ...] = ()
    """One result per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class CreateTopicsRequest(Request):
    API_KEY = ApiKey.CREATE_TOPICS
    MAX_VERSION = 0
    RESPONSE = CreateTopicsResponse

    topics: tuple[CreatableTopic, ...]
    """Topics to create."""
    timeout_ms: int = 30000
    """How long to wait for the topics to be created everywhere."""
    validate_only: bool = False
    """Check the request without creating anything."""


@message
class DeletableTopicResult:
    name: str
    """Topic name."""
    error_code: int
    """UNKNOWN_TOPIC_OR_PARTITION, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    topic_id: str = ""
    """The deleted topic's id."""


@message
class DeleteTopicsResponse(Response):
    responses: tuple[DeletableTopicResult, ...] = ()
    """One result per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DeleteTopicsRequest(Request):
    API_KEY = ApiKey.DELETE_TOPICS
    MAX_VERSION = 0
    RESPONSE = DeleteTopicsResponse

    topic_names: tuple[str, ...]
    """Topics to delete."""
    timeout_ms: int = 30000
    """How long to wait for the deletion to complete."""
