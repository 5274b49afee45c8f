"""The classic group membership protocol (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups), served by the group's coordinator.

The coordinator treats `protocol_type` and the members' metadata and assignments as opaque
bytes; for consumers (`protocol_type` "consumer") the client encodes them (its subscription
and its assigned partitions) and the group leader computes the assignment.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

__all__ = [
    "UNKNOWN_GENERATION_ID",
    "UNKNOWN_MEMBER_ID",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupMember",
    "LeaveGroupMemberResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
]

UNKNOWN_MEMBER_ID = ""
"""Kafka's JoinGroupRequest.UNKNOWN_MEMBER_ID: a member joining for the first time."""
UNKNOWN_GENERATION_ID = -1
"""Kafka's generation of a group without members (simple commits, admin resets)."""


# -- JoinGroup -------------------------------------------------------------------------------


@message
class JoinGroupProtocol:
    name: str
    """A protocol the member supports (for consumers: an assignor, "range", "roundrobin")."""
    metadata: bytes
    """The member's metadata for that protocol (for consumers: its subscription)."""


@message
class JoinGroupMember:
    member_id: str
    """A member of the new generation."""
    metadata: bytes
    """Its metadata for the chosen protocol."""
    group_instance_id: str | None = None
    """Static membership is not served: always null."""


@message
class JoinGroupResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, MEMBER_ID_REQUIRED (first join: rejoin with the member id given), NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID,
    GROUP_MAX_SIZE_REACHED, REBALANCE_IN_PROGRESS, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    generation_id: int = -1
    """The new generation."""
    protocol_type: str | None = None
    """The group's protocol type."""
    protocol_name: str | None = None
    """The protocol the coordinator chose (supported by every member)."""
    leader: str = ""
    """The member id of the group leader, who computes the assignment."""
    member_id: str = ""
    """This member's id."""
    members: tuple[JoinGroupMember, ...] = ()
    """Every member and its metadata: only in the leader's response."""


@register
@message
class JoinGroupRequest(Request):
    API_KEY = ApiKey.JOIN_GROUP
    MAX_VERSION = 0
    RESPONSE = JoinGroupResponse

    group_id: str
    """The group."""
    session_timeout_ms: int
    """The member is removed when no heartbeat comes for this long (session.timeout.ms; within
    group.min.session.timeout.ms .. group.max.session.timeout.ms)."""
    rebalance_timeout_ms: int
    """How long the coordinator waits for members to rejoin during a rebalance (the consumer's
    max.poll.interval.ms)."""
    member_id: str
    """UNKNOWN_MEMBER_ID ("") the first time; then the id the coordinator gave."""
    protocol_type: str
    """"consumer" for consumers."""
    protocols: tuple[JoinGroupProtocol, ...]
    """The protocols this member supports, in preference order."""
    group_instance_id: str | None = None
    """Static membership is not served: must be null."""
    reason: str | None = None
    """Why the member (re)joins, for the coordinator's log (KIP-800)."""


# -- SyncGroup -------------------------------------------------------------------------------


@message
class SyncGroupAssignment:
    member_id: str
    """A member of the generation."""
    assignment: bytes
    """Its assignment (for consumers: its partitions)."""


@message
class SyncGroupResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ILLEGAL_GENERATION,
    UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    protocol_type: str | None = None
    """The group's protocol type."""
    protocol_name: str | None = None
    """The generation's protocol."""
    assignment: bytes = b""
    """This member's assignment."""


@register
@message
class SyncGroupRequest(Request):
    API_KEY = ApiKey.SYNC_GROUP
    MAX_VERSION = 0
    RESPONSE = SyncGroupResponse

    group_id: str
    """The group."""
    generation_id: int
    """The generation JoinGroup gave."""
    member_id: str
    """This member."""
    assignments: tuple[SyncGroupAssignment, ...] = ()
    """Only from the leader: every member's assignment. Empty from the others."""
    group_instance_id: str | None = None
    """Static membership is not served: must be null."""
    protocol_type: str | None = None
    """If given, must be the group's."""
    protocol_name: str | None = None
    """If given, must be the generation's."""


# -- Heartbeat -------------------------------------------------------------------------------


@message
class HeartbeatResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class HeartbeatRequest(Request):
    API_KEY = ApiKey.HEARTBEAT
    MAX_VERSION = 0
    RESPONSE = HeartbeatResponse

    group_id: str
    """The group."""
    generation_id: int
    """The member's generation."""
    member_id: str
    """The member."""
    group_instance_id: str | None = None
    """Static membership is not served: must be null."""


# -- LeaveGroup ------------------------------------------------------------------------------


@message
class LeaveGroupMember:
    member_id: str
    """A member leaving."""
    group_instance_id: str | None = None
    """Static membership is not served: must be null."""
    reason: str | None = None
    """Why it leaves, for the coordinator's log (KIP-800)."""


@message
class LeaveGroupMemberResponse:
    member_id: str
    """The member."""
    error_code: int
    """NONE or UNKNOWN_MEMBER_ID."""
    group_instance_id: str | None = None
    """Always null."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class LeaveGroupResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level: NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...; per member
    below."""
    error_message: str | None = None
    """What went wrong, for a person."""
    members: tuple[LeaveGroupMemberResponse, ...] = ()
    """One entry per member in the request."""


@register
@message
class LeaveGroupRequest(Request):
    API_KEY = ApiKey.LEAVE_GROUP
    MAX_VERSION = 0
    RESPONSE = LeaveGroupResponse

    group_id: str
    """The group."""
    members: tuple[LeaveGroupMember, ...]
    """The members leaving (KIP-345's batch form)."""


# -- DescribeGroups --------------------------------------------------------------------------


@message
class DescribedGroupMember:
    member_id: str
    """The member."""
    client_id: str
    """The client id of its JoinGroup."""
    client_host: str
    """The address its JoinGroup came from."""
    member_metadata: bytes
    """Its metadata for the group's protocol (empty when the group has none yet)."""
    member_assignment: bytes
    """Its current assignment (empty unless the group is Stable)."""
    group_instance_id: str | None = None
    """Always null."""


@message
class DescribedGroup:
    group_id: str
    """The group."""
    error_code: int
    """NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID, ... A group the
    coordinator does not know is described with state "Dead" and error NONE, as Kafka's."""
    group_state: str
    """Kafka's state names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""
    protocol_type: str
    """"consumer", or "" for a group that only committed offsets."""
    protocol_data: str
    """The generation's protocol (the assignor) when Stable, else ""."""
    members: tuple[DescribedGroupMember, ...] = ()
    """The members."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class DescribeGroupsResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    groups: tuple[DescribedGroup, ...] = ()
    """One entry per group in the request."""
    error_code: int = 0
    """Request-level error (INVALID_REQUEST, ...); per group above."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DescribeGroupsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_GROUPS
    MAX_VERSION = 0
    RESPONSE = DescribeGroupsResponse

    groups: tuple[str, ...]
    """The groups to describe (all coordinated by the broker asked)."""


# -- ListGroups ------------------------------------------------------------------------------


@message
class ListedGroup:
    group_id: str
    """The group."""
    protocol_type: str
    """"consumer", or "" for a group that only committed offsets."""
    group_state: str
    """Kafka's state name."""


@message
class ListGroupsResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, or COORDINATOR_LOAD_IN_PROGRESS while some offsets partition is loading (the
    groups listed are then those already loaded)."""
    error_message: str | None = None
    """What went wrong, for a person."""
    groups: tuple[ListedGroup, ...] = ()
    """The groups this broker coordinates."""


@register
@message
class ListGroupsRequest(Request):
    API_KEY = ApiKey.LIST_GROUPS
    MAX_VERSION = 0
    RESPONSE = ListGroupsResponse

    states_filter: tuple[str, ...] = ()
    """Only groups in these states (KIP-518); empty: all."""
