"""The rebalance protocol on one group (Kafka's GroupCoordinator prepareRebalance,
onCompleteJoin, DelayedJoin / InitialDelayedJoin, DelayedSync, heartbeat expiry): pure
transitions that return what to answer and what to store."""

from __future__ import annotations

from collections.abc import Callable

from broker.group.effects import Delivery, Effects, GroupConfig, StoreGroup, join_error, sync_error
from broker.group.group import Group, GroupState, Member
from broker.group.records import GroupKey
from broker.group.snapshot import group_value
from protocol.errors import ErrorCode
from protocol.messages.groups import JoinGroupMember, JoinGroupResponse, SyncGroupResponse


class Rebalance:
    def __init__(self, config: GroupConfig, partition_of: Callable[[str], int]) -> None:
        self.config = config
        self.partition_of = partition_of

    def join_response(self, group: Group, member: Member) -> JoinGroupResponse:
        assert group.protocol is not None
        members: tuple[JoinGroupMember, ...] = ()
        if member.member_id == group.leader:
            members = tuple(
                JoinGroupMember(member_id=m.member_id, metadata=m.metadata(group.protocol))
                for m in group.members.values()
            )
        return JoinGroupResponse(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            leader=group.leader or "",
            member_id=member.member_id,
            members=members,
        )

    def prepare_rebalance(self, group: Group, now_ms: int) -> Effects:
        effects = Effects()
        if group.state == GroupState.COMPLETING_REBALANCE:
            effects.extend(self.reset_and_abort_syncs(group))
        initial = group.state == GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        group.sync_deadline_ms = None
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if initial:
            # InitialDelayedJoin: wait for more members before the first generation.
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_timeout)
            group.in_initial_delay = delay > 0
            group.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            group.new_member_added = False
            group.join_deadline_ms = now_ms + delay
        else:
            group.in_initial_delay = False
            group.join_deadline_ms = now_ms + rebalance_timeout
        return effects

    def reset_and_abort_syncs(self, group: Group) -> Effects:
        effects = Effects()
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                member.awaiting_sync = False
                effects.deliveries.append(
                    Delivery(
                        (group.group_id, member.member_id, "sync"),
                        sync_error(
                            ErrorCode.REBALANCE_IN_PROGRESS,
                            f"group {group.group_id!r} is rebalancing; rejoin",
                        ),
                    )
                )
        return effects

    def try_complete_join(self, group: Group, now_ms: int) -> Effects:
        if (
            group.state == GroupState.PREPARING_REBALANCE
            and not group.in_initial_delay
            and group.all_members_joined()
        ):
            return self.complete_join(group, now_ms)
        return Effects()

    def complete_join(self, group: Group, now_ms: int) -> Effects:
        """onCompleteJoin: members that did not rejoin are gone; next generation."""
        effects = Effects()
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            self.remove_member(group, member)
        group.join_deadline_ms = None
        group.in_initial_delay = False
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.transition(GroupState.EMPTY, now_ms)
            effects.stores.append(self.store(group))
            return effects
        group.protocol = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        for member in group.members.values():
            member.awaiting_join = False
            member.sent_sync = False
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            effects.deliveries.append(
                Delivery(
                    (group.group_id, member.member_id, "join"), self.join_response(group, member)
                )
            )
        return effects

    def remove_member(self, group: Group, member: Member) -> list[Delivery]:
        deliveries = answer_waiting(
            group, member, ErrorCode.UNKNOWN_MEMBER_ID, f"member {member.member_id} was removed"
        )
        del group.members[member.member_id]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        return deliveries

    def store(self, group: Group) -> StoreGroup:
        return StoreGroup(
            self.partition_of(group.group_id),
            group.group_id,
            group.generation,
            GroupKey(group.group_id),
            group_value(group),
        )

    def sync_response(self, group: Group, member: Member) -> SyncGroupResponse:
        return SyncGroupResponse(
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            assignment=member.assignment,
        )

    def after_removal(self, group: Group, now_ms: int) -> Effects:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return (
                self.prepare_rebalance(group, now_ms)
                if group.members
                else self.to_empty(group, now_ms)
            )
        if group.state == GroupState.PREPARING_REBALANCE:
            return self.try_complete_join(group, now_ms)
        return Effects()

    def to_empty(self, group: Group, now_ms: int) -> Effects:
        """The last member left a Stable/CompletingRebalance group: Kafka rebalances, which
        completes at once with no member (a new, empty generation)."""
        effects = self.prepare_rebalance(group, now_ms)
        group.in_initial_delay = False
        effects.extend(self.complete_join(group, now_ms))
        return effects

    def tick_group(self, group: Group, now_ms: int) -> Effects:
        effects = Effects()
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now_ms:
                del group.pending_members[member_id]
                effects.extend(self.try_complete_join(group, now_ms))
        expired = [
            m
            for m in group.members.values()
            if m.heartbeat_deadline_ms <= now_ms and not (m.awaiting_join or m.awaiting_sync)
        ]
        for member in expired:
            effects.deliveries.extend(self.remove_member(group, member))
        if expired:
            effects.extend(self.after_removal(group, now_ms))
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            effects.extend(self.join_deadline(group, now_ms))
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
            effects.extend(self.sync_deadline(group, now_ms))
        return effects

    def join_deadline(self, group: Group, now_ms: int) -> Effects:
        if (
            group.in_initial_delay
            and group.new_member_added
            and group.initial_delay_remaining_ms > 0
        ):
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay
            group.new_member_added = False
            group.join_deadline_ms = now_ms + delay
            return Effects()
        group.in_initial_delay = False
        group.pending_members.clear()
        return self.complete_join(group, now_ms)

    def sync_deadline(self, group: Group, now_ms: int) -> Effects:
        """DelayedSync: members that did not sync in time are removed and the group rebalances."""
        effects = Effects()
        group.sync_deadline_ms = None
        if group.state != GroupState.COMPLETING_REBALANCE:
            return effects
        for member in [m for m in group.members.values() if not m.sent_sync]:
            effects.deliveries.extend(self.remove_member(group, member))
        effects.extend(self.after_removal(group, now_ms))
        return effects


def answer_waiting(group: Group, member: Member, code: ErrorCode, message: str) -> list[Delivery]:
    deliveries = []
    if member.awaiting_join:
        member.awaiting_join = False
        deliveries.append(
            Delivery(
                (group.group_id, member.member_id, "join"),
                join_error(code, message, member.member_id),
            )
        )
    if member.awaiting_sync:
        member.awaiting_sync = False
        deliveries.append(
            Delivery((group.group_id, member.member_id, "sync"), sync_error(code, message))
        )
    return deliveries
