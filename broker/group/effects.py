"""What the group coordinator's core hands back: answers for parked requests, group stores,
and the shapes they travel in (plus the core's config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.group.records import GroupKey, GroupValue, OffsetValue
from protocol.errors import ErrorCode
from protocol.messages.groups import JoinGroupResponse, SyncGroupResponse
from protocol.names import TopicPartition

WaitKey = tuple[str, str, str]
"""(group id, member id, "join" | "sync"): where a parked request waits for its answer."""
Response = JoinGroupResponse | SyncGroupResponse

INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's group.* and offsets.* broker configs the core needs (Kafka's defaults)."""

    num_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT_MAX
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Delivery:
    key: WaitKey
    response: Response


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """Append this group's metadata (None: a tombstone) to its offsets partition."""

    partition: int
    group_id: str
    generation: int
    key: GroupKey
    value: GroupValue | None


@dataclass(slots=True)
class Effects:
    deliveries: list[Delivery] = field(default_factory=list)
    stores: list[StoreGroup] = field(default_factory=list)

    def extend(self, other: Effects) -> None:
        self.deliveries.extend(other.deliveries)
        self.stores.extend(other.stores)


@dataclass(slots=True)
class Outcome:
    """A call's own answer (None: wait on `key`) and what else it caused."""

    response: Response | None
    key: WaitKey | None = None
    effects: Effects = field(default_factory=Effects)


@dataclass(slots=True)
class Ownership:
    epoch: int
    loading: bool


@dataclass(frozen=True, slots=True)
class LoadedPartition:
    """What the loader folded out of one offsets partition."""

    offsets: Mapping[str, Mapping[TopicPartition, OffsetValue]]
    groups: Mapping[str, GroupValue]


def join_error(code: ErrorCode, message: str, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=int(code), error_message=message, member_id=member_id)


def sync_error(code: ErrorCode, message: str) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=int(code), error_message=message)
