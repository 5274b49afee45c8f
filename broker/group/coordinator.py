"""The group coordinator's state machine (Kafka's GroupCoordinator, classic protocol), pure.

Every call takes `now_ms` (an injected clock); nothing waits. A JoinGroup or SyncGroup that
Kafka parks (DelayedJoin, a follower's sync) returns no response: the caller waits on its
`WaitKey` (group, member, "join" | "sync") and the answer comes later as a `Delivery` out of
whichever call completed it (another member's join, `tick` at a deadline, a leave, a stored
group). `Effects.stores` are group metadata records the driver must append to the group's
offsets partition; it reports the outcome with `group_stored`.

Ownership: `begin_load(partition, epoch)` on becoming leader of an offsets partition (its
groups answer COORDINATOR_LOAD_IN_PROGRESS), `complete_load` installs what the loader read
unless a newer election or a resignation came meanwhile, `unload` on resignation (NOT_COORDINATOR).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

from broker.group.effects import (
    Delivery,
    Effects,
    GroupConfig,
    LoadedPartition,
    Outcome,
    Ownership,
    WaitKey,
    join_error,
    sync_error,
)
from broker.group.group import Group, GroupState, Member
from broker.group.hashing import partition_for
from broker.group.rebalance import Rebalance, answer_waiting
from broker.group.records import GroupKey, OffsetKey, OffsetValue
from broker.group.snapshot import group_from_value
from protocol.errors import ErrorCode
from protocol.messages.groups import DescribedGroup, DescribedGroupMember, ListedGroup
from protocol.names import TopicPartition


class GroupCoordinatorCore:
    def __init__(
        self,
        config: GroupConfig,
        *,
        new_member_id: Callable[[str], str] = lambda client_id: f"{client_id}-{uuid.uuid4()}",
    ) -> None:
        self.config = config
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self.rebalance = Rebalance(config, self.partition_of)
        self.owned: dict[int, Ownership] = {}

    # -- ownership -------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def group_error(self, group_id: str) -> tuple[ErrorCode, str]:
        """NONE when this coordinator serves `group_id` now."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, "the group id must not be empty"
        partition = self.partition_of(group_id)
        owned = self.owned.get(partition)
        if owned is None:
            return (
                ErrorCode.NOT_COORDINATOR,
                f"this broker does not lead __consumer_offsets-{partition}, the partition of "
                f"group {group_id!r}; find the coordinator again",
            )
        if owned.loading:
            return (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"loading group {group_id!r} from __consumer_offsets-{partition}",
            )
        return ErrorCode.NONE, ""

    def begin_load(self, partition: int, epoch: int) -> Effects | None:
        """onElection: forget what we had of the partition and load it anew. None when there
        is nothing to load: this epoch (or a newer one) is already loading or loaded (a change
        set that only moved the ISR names the partition again), or the partition is loaded
        and this broker stayed its leader (only the epoch moves)."""
        owned = self.owned.get(partition)
        if owned is not None and owned.epoch >= epoch:
            return None
        if owned is not None and not owned.loading:
            # Still the leader, only the epoch moved (ZK mode bumps it when the controller
            # shrinks the ISR): the groups in memory are the log's, keep them (Kafka's
            # makeLeader reports no new leader then).
            owned.epoch = epoch
            return None
        effects = self.unload(partition, None)
        self.owned[partition] = Ownership(epoch, loading=True)
        return effects

    def complete_load(
        self, partition: int, epoch: int, loaded: LoadedPartition, now_ms: int
    ) -> bool:
        """Install a finished load; False (discarded) when the partition moved on meanwhile."""
        owned = self.owned.get(partition)
        if owned is None or owned.epoch != epoch or not owned.loading:
            return False
        for group_id in set(loaded.groups) | set(loaded.offsets):
            group = group_from_value(group_id, loaded.groups.get(group_id), now_ms)
            group.offsets.update(loaded.offsets.get(group_id, {}))
            self.groups[group_id] = group
        owned.loading = False
        return True

    def unload(self, partition: int, epoch: int | None) -> Effects:
        """onResignation (epoch None: whatever the epoch): drop the partition's groups; their
        waiting members are answered NOT_COORDINATOR."""
        effects = Effects()
        owned = self.owned.get(partition)
        if owned is not None and epoch is not None and owned.epoch > epoch:
            return effects  # a newer election already took over
        self.owned.pop(partition, None)
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            group = self.groups.pop(group_id)
            message = f"group {group_id!r} moved to another coordinator"
            for member in group.members.values():
                effects.deliveries.extend(
                    answer_waiting(group, member, ErrorCode.NOT_COORDINATOR, message)
                )
        return effects

    def loading(self) -> bool:
        return any(o.loading for o in self.owned.values())

    # -- JoinGroup ---------------------------------------------------------------------------

    def join(
        self,
        *,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        now_ms: int,
    ) -> Outcome:
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return Outcome(join_error(code, message, member_id))
        c = self.config
        if not c.min_session_timeout_ms <= session_timeout_ms <= c.max_session_timeout_ms:
            return Outcome(
                join_error(
                    ErrorCode.INVALID_SESSION_TIMEOUT,
                    f"session timeout {session_timeout_ms} ms is outside "
                    f"[group.min.session.timeout.ms={c.min_session_timeout_ms}, "
                    f"group.max.session.timeout.ms={c.max_session_timeout_ms}]",
                    member_id,
                )
            )
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return Outcome(
                    join_error(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"group {group_id!r} has no member {member_id!r}",
                        member_id,
                    )
                )
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        if group.state == GroupState.DEAD:
            return Outcome(
                join_error(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"group {group_id!r} is being removed; retry",
                    member_id,
                )
            )
        if not group.supports(protocol_type, protocols):
            return Outcome(
                join_error(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"protocol type {protocol_type!r} with protocols "
                    f"{[n for n, _ in protocols]} is incompatible with group {group_id!r} "
                    f"(type {group.protocol_type!r}, common protocols "
                    f"{sorted(group.candidate_protocols())})",
                    member_id,
                )
            )
        if not member_id:
            return self._join_unknown(group, client_id, session_timeout_ms, now_ms)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            member = Member(
                member_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                is_new=True,
            )
            return self._add_member_and_rebalance(group, member, now_ms)
        member = group.members.get(member_id)
        if member is None:
            return Outcome(
                join_error(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group {group_id!r} has no member {member_id!r}",
                    member_id,
                )
            )
        member.client_id, member.client_host = client_id, client_host
        return self._join_known(
            group, member, rebalance_timeout_ms, session_timeout_ms, protocols, now_ms
        )

    def _join_unknown(
        self, group: Group, client_id: str, session_timeout_ms: int, now_ms: int
    ) -> Outcome:
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return Outcome(
                join_error(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"group {group.group_id!r} has group.max.size={self.config.max_size} members",
                )
            )
        member_id = self.new_member_id(client_id)
        # KIP-394: the member must rejoin with its id within the session timeout.
        group.pending_members[member_id] = now_ms + session_timeout_ms
        return Outcome(
            join_error(
                ErrorCode.MEMBER_ID_REQUIRED,
                "rejoin with the member id given (KIP-394)",
                member_id,
            )
        )

    def _join_known(
        self,
        group: Group,
        member: Member,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: tuple[tuple[str, bytes], ...],
        now_ms: int,
    ) -> Outcome:
        key = (group.group_id, member.member_id, "join")
        effects = Effects()
        superseded = None
        if member.awaiting_join:
            # A retried join replaces the parked one, which is told why (delivered first, to
            # the waiter parked before this call).
            superseded = Delivery(
                key,
                join_error(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    "superseded by a newer JoinGroup of the same member",
                    member.member_id,
                ),
            )
        unchanged = member.matches(protocols)
        if (
            group.state == GroupState.COMPLETING_REBALANCE
            and unchanged
            and not member.awaiting_join
        ):
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return Outcome(self.rebalance.join_response(group, member))
        if group.state == GroupState.STABLE and unchanged and member.member_id != group.leader:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return Outcome(self.rebalance.join_response(group, member))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = True
        if group.state != GroupState.PREPARING_REBALANCE:
            effects.extend(self.rebalance.prepare_rebalance(group, now_ms))
        effects.extend(self.rebalance.try_complete_join(group, now_ms))
        outcome = self._own(key, effects)
        if superseded is not None:
            outcome.effects.deliveries.insert(0, superseded)
        return outcome

    def _add_member_and_rebalance(self, group: Group, member: Member, now_ms: int) -> Outcome:
        key = (group.group_id, member.member_id, "join")
        if not group.members:
            group.protocol_type = member.protocol_type
        if group.leader is None:
            group.leader = member.member_id
        member.awaiting_join = True
        group.members[member.member_id] = member
        group.new_member_added = True
        effects = Effects()
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            effects.extend(self.rebalance.prepare_rebalance(group, now_ms))
        effects.extend(self.rebalance.try_complete_join(group, now_ms))
        return self._own(key, effects)

    @staticmethod
    def _own(key: WaitKey, effects: Effects) -> Outcome:
        """The caller's answer if it is among the deliveries already, else wait on `key`."""
        for i, delivery in enumerate(effects.deliveries):
            if delivery.key == key:
                del effects.deliveries[i]
                return Outcome(delivery.response, effects=effects)
        return Outcome(None, key, effects)

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync(
        self,
        *,
        group_id: str,
        member_id: str,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        now_ms: int,
    ) -> Outcome:
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return Outcome(sync_error(code, message))
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return Outcome(
                sync_error(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id!r} has no member {member_id!r}"
                )
            )
        if generation != group.generation:
            return Outcome(
                sync_error(
                    ErrorCode.ILLEGAL_GENERATION,
                    f"generation {generation} is not group {group_id!r}'s {group.generation}",
                )
            )
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol
        ):
            return Outcome(
                sync_error(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"group {group_id!r} has protocol {group.protocol_type}/{group.protocol}",
                )
            )
        if group.state == GroupState.PREPARING_REBALANCE:
            return Outcome(
                sync_error(
                    ErrorCode.REBALANCE_IN_PROGRESS, f"group {group_id!r} is rebalancing; rejoin"
                )
            )
        if group.state == GroupState.STABLE:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return Outcome(self.rebalance.sync_response(group, member))
        # CompletingRebalance: park until the leader's assignment is stored.
        key = (group_id, member_id, "sync")
        effects = Effects()
        member.awaiting_sync = True
        member.sent_sync = True
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            effects.stores.append(self.rebalance.store(group))
        return Outcome(None, key, effects)

    def group_stored(
        self, group_id: str, generation: int, error: ErrorCode, message: str, now_ms: int
    ) -> Effects:
        """The driver appended (or failed to append) a StoreGroup of `generation`."""
        effects = Effects()
        group = self.groups.get(group_id)
        if (
            group is None
            or group.generation != generation
            or group.state != GroupState.COMPLETING_REBALANCE
        ):
            return effects
        if error != ErrorCode.NONE:
            # Kafka resets the assignment and rebalances; the members learn it from the sync.
            for member in group.members.values():
                if member.awaiting_sync:
                    member.awaiting_sync = False
                    effects.deliveries.append(
                        Delivery((group_id, member.member_id, "sync"), sync_error(error, message))
                    )
            effects.extend(self.rebalance.prepare_rebalance(group, now_ms))
            return effects
        group.transition(GroupState.STABLE, now_ms)
        group.sync_deadline_ms = None
        for member in group.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                effects.deliveries.append(
                    Delivery(
                        (group_id, member.member_id, "sync"),
                        self.rebalance.sync_response(group, member),
                    )
                )
        return effects

    # -- Heartbeat and LeaveGroup -------------------------------------------------------------

    def heartbeat(
        self, *, group_id: str, member_id: str, generation: int, now_ms: int
    ) -> tuple[ErrorCode, str]:
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return code, message
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id!r} has no member {member_id!r}"
        if generation != group.generation:
            return (
                ErrorCode.ILLEGAL_GENERATION,
                f"generation {generation} is not group {group_id!r}'s {group.generation}",
            )
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, f"group {group_id!r} is rebalancing; rejoin"
        return ErrorCode.NONE, ""

    def leave(
        self, *, group_id: str, member_ids: Iterable[str], now_ms: int
    ) -> tuple[ErrorCode, str, list[tuple[str, ErrorCode]], Effects]:
        """(request-level error, message, per-member errors, effects)."""
        effects = Effects()
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return code, message, [], effects
        group = self.groups.get(group_id)
        results: list[tuple[str, ErrorCode]] = []
        removed = False
        for member_id in member_ids:
            if group is not None and member_id in group.pending_members:
                del group.pending_members[member_id]
                results.append((member_id, ErrorCode.NONE))
                removed = True
            elif group is not None and member_id in group.members:
                effects.deliveries.extend(
                    self.rebalance.remove_member(group, group.members[member_id])
                )
                results.append((member_id, ErrorCode.NONE))
                removed = True
            else:
                results.append((member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        if group is not None and removed:
            effects.extend(self.rebalance.after_removal(group, now_ms))
        return ErrorCode.NONE, "", results, effects

    # -- timers ------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        times: list[int] = []
        for group in self.groups.values():
            times.extend(group.pending_members.values())
            if group.join_deadline_ms is not None:
                times.append(group.join_deadline_ms)
            if group.sync_deadline_ms is not None:
                times.append(group.sync_deadline_ms)
            times.extend(
                m.heartbeat_deadline_ms
                for m in group.members.values()
                if not (m.awaiting_join or m.awaiting_sync)
            )
        return min(times, default=None)

    def tick(self, now_ms: int) -> Effects:
        """Fire every deadline at or before `now_ms`."""
        effects = Effects()
        for group in list(self.groups.values()):
            effects.extend(self.rebalance.tick_group(group, now_ms))
        return effects

    # -- offsets -----------------------------------------------------------------------------

    def validate_commit(
        self, *, group_id: str, member_id: str, generation: int, now_ms: int
    ) -> tuple[ErrorCode, str]:
        """Kafka's doCommitOffsets checks; an unknown group committing with generation -1 is
        created Empty (a group that only keeps offsets)."""
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return code, message
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return (
                    ErrorCode.ILLEGAL_GENERATION,
                    f"group {group_id!r} does not exist; commit with generation -1 outside "
                    "group management",
                )
            self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
            return ErrorCode.NONE, ""
        if group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {group_id!r} is being removed"
        if generation < 0 and group.state == GroupState.EMPTY:
            return ErrorCode.NONE, ""
        member = group.members.get(member_id)
        if member is None:
            return (
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"group {group_id!r} ({group.state.value}) has no member {member_id!r}",
            )
        if generation != group.generation:
            return (
                ErrorCode.ILLEGAL_GENERATION,
                f"generation {generation} is not group {group_id!r}'s {group.generation}",
            )
        if group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, f"group {group_id!r} is rebalancing; rejoin"
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.NONE, ""

    def metadata_problem(self, metadata: str | None) -> str | None:
        limit = self.config.offset_metadata_max_bytes
        if metadata is not None and len(metadata.encode()) > limit:
            return f"offset metadata of {len(metadata.encode())} bytes is over offset.metadata.max.bytes={limit}"
        return None

    def offsets_committed(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetValue]
    ) -> None:
        """The commit is replicated: the cache takes it (a group unloaded meanwhile is not
        revived: the new coordinator reads the commit from the log)."""
        group = self.groups.get(group_id)
        if group is not None:
            group.offsets.update(offsets)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue | None]:
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets.get(tp) for tp in partitions}

    def committed_offsets(self) -> Iterator[tuple[str, TopicPartition, int]]:
        """(group, partition, offset) of every commit of the groups served here (for the
        consumer group lag metrics: a scrape, in another thread, copies each dict first)."""
        for group_id, group in list(self.groups.items()):
            for tp, value in list(group.offsets.items()):
                yield group_id, tp, value.offset

    def expire_offsets(self, now_ms: int) -> dict[int, list[tuple[OffsetKey | GroupKey, None]]]:
        """Kafka's cleanupGroupMetadata: offsets of Empty groups older than
        offsets.retention.ms are deleted (tombstones per offsets partition); an Empty group
        with no offsets left is removed (Dead) with a group tombstone."""
        retention = self.config.offsets_retention_ms
        out: dict[int, list[tuple[OffsetKey | GroupKey, None]]] = {}
        for group_id, group in list(self.groups.items()):
            partition = self.partition_of(group_id)
            owned = self.owned.get(partition)
            if owned is None or owned.loading or group.state != GroupState.EMPTY:
                continue
            if group.protocol_type is None:  # offsets-only group: each offset on its own
                expired = [
                    tp
                    for tp, v in group.offsets.items()
                    if v.commit_timestamp_ms + retention <= now_ms
                ]
            elif group.state_timestamp_ms + retention <= now_ms:
                expired = list(group.offsets)
            else:
                expired = []
            tombstones: list[tuple[OffsetKey | GroupKey, None]] = [
                (OffsetKey(group_id, tp.topic, tp.partition), None) for tp in expired
            ]
            for tp in expired:
                del group.offsets[tp]
            if not group.offsets and not group.members and not group.pending_members:
                group.transition(GroupState.DEAD, now_ms)
                del self.groups[group_id]
                tombstones.append((GroupKey(group_id), None))
            if tombstones:
                out.setdefault(partition, []).extend(tombstones)
        return out

    # -- DescribeGroups and ListGroups -------------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        code, message = self.group_error(group_id)
        if code != ErrorCode.NONE:
            return DescribedGroup(
                group_id=group_id,
                error_code=int(code),
                group_state="",
                protocol_type="",
                protocol_data="",
                error_message=message,
            )
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(
                group_id=group_id,
                error_code=0,
                group_state=GroupState.DEAD.value,
                protocol_type="",
                protocol_data="",
            )
        stable = group.state == GroupState.STABLE
        members = tuple(
            DescribedGroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol) if group.protocol else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return DescribedGroup(
            group_id=group_id,
            error_code=0,
            group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol or "") if stable else "",
            members=members,
        )

    def list_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value
            )
            for g in sorted(self.groups.values(), key=lambda g: g.group_id)
            if not self.owned.get(self.partition_of(g.group_id), Ownership(0, True)).loading
            and (not wanted or g.state.value.lower() in wanted)
        ]
