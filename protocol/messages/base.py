"""API keys (Kafka's numbering), the message base classes and the API registry."""

from __future__ import annotations

import dataclasses
from enum import IntEnum
from typing import Any, ClassVar, TypeVar, dataclass_transform

C = TypeVar("C")
R = TypeVar("R", bound="type[Request]")


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    ALLOCATE_PRODUCER_IDS = 67


INTER_BROKER_APIS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ALTER_PARTITION,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.FETCH_SNAPSHOT,
    }
)
"""The APIs only brokers and controllers send each other (Kafka's CLUSTER_ACTION APIs; a
follower's Fetch, replica_id >= 0, is one too). UnregisterBroker is not: an operator's tool
sends it (ALTER on the cluster)."""


@dataclass_transform(frozen_default=True, kw_only_default=True)
def message(cls: type[C]) -> type[C]:
    """Declare a wire message: a frozen, slotted, keyword-only dataclass.

    Fields are encoded positionally in declaration order, so required fields come first and a
    field added in a later version goes last with a default.
    """
    return dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)


@dataclass_transform(frozen_default=True, kw_only_default=True)
def reused_message(cls: type[C]) -> type[C]:
    """A wire message whose instances a server keeps and sends again and again (a broker's
    cached Metadata topics): not slotted, so that `protocol.schema` can keep each instance's
    encoded form on it (`WIRE_MEMO`) and encode it once. Immutable like every message."""
    made = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    made.WIRE_MEMO = True  # type: ignore[attr-defined]
    return made


class Request:
    """Base of request bodies. Subclasses set the API key, version range and response type."""

    __slots__ = ()
    API_KEY: ClassVar[ApiKey]
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    RESPONSE: ClassVar[type[Response]]


class Response:
    """Base of response bodies. Every response carries `error_code` and `error_message`."""

    __slots__ = ()
    error_code: int
    error_message: str | None


REQUESTS: dict[ApiKey, type[Request]] = {}


def register(cls: R) -> R:
    """Add a request type to the registry the codec and ApiVersions use."""
    if cls.API_KEY in REQUESTS:
        raise ValueError(f"API key {cls.API_KEY!r} registered twice")
    REQUESTS[cls.API_KEY] = cls
    return cls


def error_response(request_type: type[Request], code: int, message: str) -> Response:
    """A response of the right type carrying only a request-level error."""
    return response_with_error(request_type.RESPONSE, code, message)


def response_with_error(response_type: type[C], code: int, message: str) -> C:
    """A `response_type` (any dataclass with error_code and error_message, wire message or
    not) carrying only a request-level error: its other required fields empty."""
    cls: Any = response_type
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _empty(f.type)
    return cls(**kwargs, error_code=int(code), error_message=message)


def _empty(tp: Any) -> Any:
    text = tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))
    if text.startswith("tuple"):
        return ()
    if text == "int":
        return -1
    if text == "str":
        return ""
    if text == "bytes":
        return b""
    if text == "bool":
        return False
    if "None" in text:
        return None
    raise TypeError(f"no empty value for required field type {text}")
