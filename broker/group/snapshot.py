"""A group to and from its `__consumer_offsets` metadata record (Kafka's
GroupMetadataManager.groupMetadataValue / readGroupMessageValue)."""

from __future__ import annotations

from broker.group.group import Group, GroupState, Member
from broker.group.records import GroupValue, MemberValue


def group_value(group: Group) -> GroupValue:
    return GroupValue(
        protocol_type=group.protocol_type,
        generation=group.generation,
        protocol=group.protocol,
        leader=group.leader,
        state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            MemberValue(
                m.member_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol) if group.protocol else b"",
                m.assignment,
            )
            for m in group.members.values()
        ),
    )


def group_from_value(group_id: str, value: GroupValue | None, now_ms: int) -> Group:
    """A loaded group: Stable with its members (each gets a full session to heartbeat the
    new coordinator), or Empty."""
    if value is None:
        return Group(group_id, state_timestamp_ms=now_ms)
    group = Group(
        group_id,
        generation=value.generation,
        protocol_type=value.protocol_type,
        protocol=value.protocol,
        leader=value.leader,
        state_timestamp_ms=value.state_timestamp_ms,
    )
    for m in value.members:
        protocols = ((value.protocol, m.subscription),) if value.protocol else ()
        group.members[m.member_id] = Member(
            m.member_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            value.protocol_type or "",
            protocols,
            assignment=m.assignment,
            heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
        )
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group
