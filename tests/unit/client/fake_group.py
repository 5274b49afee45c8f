"""A scripted group coordinator for client unit tests, plugged into FakeBroker: Kafka's classic
protocol reduced to what the client's state machine meets (KIP-394 member ids, a rebalance
round that completes when every member has rejoined, REBALANCE_IN_PROGRESS on heartbeats,
generations, offsets kept in a dict). No session expiry: tests call `expire(member_id)`.

`fail_next[ApiKey] = [ErrorCode, ...]` answers the next requests of that API with those errors.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import trio

from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorResponse
from protocol.messages.group_offsets import (
    OffsetCommitPartitionResponse,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
)
from protocol.messages.groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsResponse,
    SyncGroupResponse,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from protocol.names import TopicPartition
from tests.unit.client.fake_broker import FakeBroker


@dataclass
class FakeGroup:
    group_id: str
    state: str = "Empty"
    generation: int = 0
    protocol: str | None = None
    leader: str = ""
    members: dict[str, Any] = field(default_factory=dict)
    """member id -> its last JoinGroupRequest."""
    joined: set[str] = field(default_factory=set)
    assignments: dict[str, bytes] = field(default_factory=dict)
    round_done: trio.Event = field(default_factory=trio.Event)
    synced: trio.Event = field(default_factory=trio.Event)


class FakeGroupCoordinator:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.groups: dict[str, FakeGroup] = {}
        self.offsets: dict[tuple[str, TopicPartition], tuple[int, int]] = {}
        self.fail_next: dict[ApiKey, list[ErrorCode]] = {}
        self.requests: list[Any] = []
        self._ids = itertools.count(1)
        handlers = {
            ApiKey.FIND_COORDINATOR: self._find,
            ApiKey.JOIN_GROUP: self._join,
            ApiKey.SYNC_GROUP: self._sync,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave,
            ApiKey.OFFSET_COMMIT: self._commit,
            ApiKey.OFFSET_FETCH: self._fetch_offsets,
            ApiKey.DESCRIBE_GROUPS: self._describe,
            ApiKey.LIST_GROUPS: self._list,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._epoch_end,
        }
        broker.handlers.update(handlers)

    def group(self, group_id: str) -> FakeGroup:
        return self.groups.setdefault(group_id, FakeGroup(group_id))

    def _error(self, key: ApiKey) -> ErrorCode:
        queue = self.fail_next.get(key)
        return queue.pop(0) if queue else ErrorCode.NONE

    # -- membership ---------------------------------------------------------------------------

    def expire(self, group_id: str, member_id: str) -> None:
        """What a session expiry does: the member is gone and the group rebalances."""
        group = self.group(group_id)
        group.members.pop(member_id, None)
        group.joined.discard(member_id)
        self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: FakeGroup) -> None:
        if not group.members:
            group.state, group.protocol, group.leader = "Empty", None, ""
            group.generation += 1
            return
        if group.state != "PreparingRebalance":
            group.state = "PreparingRebalance"
            group.joined = set()
            group.round_done = trio.Event()

    def _maybe_complete_join(self, group: FakeGroup) -> None:
        if group.state != "PreparingRebalance" or not group.members:
            return
        if set(group.members) - group.joined:
            return
        group.generation += 1
        group.state = "CompletingRebalance"
        group.leader = min(group.members)
        names = [p.name for p in group.members[group.leader].protocols]
        group.protocol = next(
            n
            for n in names
            if all(n in [p.name for p in r.protocols] for r in group.members.values())
        )
        group.assignments = {}
        group.synced = trio.Event()
        group.round_done.set()

    async def _join(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.JOIN_GROUP)
        if code:
            return JoinGroupResponse(error_code=code, error_message=f"scripted {code.name}")
        group = self.group(req.group_id)
        if req.member_id == "":
            member_id = f"member-{next(self._ids)}"
            # KIP-394: remembered as pending; the rejoin with this id is the real join
            group.members.setdefault(member_id, req)
            group.joined.discard(member_id)
            self._prepare_rebalance(group)
            return JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        if req.member_id not in group.members:
            return JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        group.members[req.member_id] = req
        self._prepare_rebalance(group)
        group.joined.add(req.member_id)
        round_done = group.round_done
        self._maybe_complete_join(group)
        await round_done.wait()
        if req.member_id not in group.members:
            return JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        members = ()
        if req.member_id == group.leader:
            members = tuple(
                JoinGroupMember(
                    member_id=m,
                    metadata=next(p.metadata for p in r.protocols if p.name == group.protocol),
                )
                for m, r in sorted(group.members.items())
            )
        return JoinGroupResponse(
            generation_id=group.generation,
            protocol_type="consumer",
            protocol_name=group.protocol,
            leader=group.leader,
            member_id=req.member_id,
            members=members,
        )

    async def _sync(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.SYNC_GROUP)
        group = self.group(req.group_id)
        if not code and req.member_id not in group.members:
            code = ErrorCode.UNKNOWN_MEMBER_ID
        if not code and req.generation_id != group.generation:
            code = ErrorCode.ILLEGAL_GENERATION
        if not code and group.state == "PreparingRebalance":
            code = ErrorCode.REBALANCE_IN_PROGRESS
        if code:
            return SyncGroupResponse(error_code=code, error_message=f"scripted {code.name}")
        if req.member_id == group.leader:
            group.assignments = {a.member_id: a.assignment for a in req.assignments}
            group.state = "Stable"
            group.synced.set()
        synced = group.synced
        await synced.wait()
        if req.generation_id != group.generation:
            return SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        return SyncGroupResponse(
            protocol_type="consumer",
            protocol_name=group.protocol,
            assignment=group.assignments.get(req.member_id, b""),
        )

    async def _heartbeat(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.HEARTBEAT)
        group = self.group(req.group_id)
        if not code and req.member_id not in group.members:
            code = ErrorCode.UNKNOWN_MEMBER_ID
        if not code and req.generation_id != group.generation:
            code = ErrorCode.ILLEGAL_GENERATION
        if not code and group.state == "PreparingRebalance":
            code = ErrorCode.REBALANCE_IN_PROGRESS
        return HeartbeatResponse(error_code=code)

    async def _leave(self, req: Any) -> Any:
        self.requests.append(req)
        group = self.group(req.group_id)
        out = []
        for m in req.members:
            known = group.members.pop(m.member_id, None) is not None
            group.joined.discard(m.member_id)
            out.append(
                LeaveGroupMemberResponse(
                    member_id=m.member_id,
                    error_code=0 if known else ErrorCode.UNKNOWN_MEMBER_ID,
                )
            )
        self._prepare_rebalance(group)
        self._maybe_complete_join(group)
        return LeaveGroupResponse(members=tuple(out))

    # -- offsets ------------------------------------------------------------------------------

    async def _commit(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.OFFSET_COMMIT)
        group = self.group(req.group_id)
        if not code:
            if req.generation_id < 0:
                if group.members:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            elif req.member_id not in group.members:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            elif req.generation_id != group.generation:
                code = ErrorCode.ILLEGAL_GENERATION
            elif group.state == "CompletingRebalance":
                code = ErrorCode.REBALANCE_IN_PROGRESS
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if not code:
                    tp = TopicPartition(t.name, p.partition_index)
                    self.offsets[(req.group_id, tp)] = (
                        p.committed_offset,
                        p.committed_leader_epoch,
                    )
                parts.append(
                    OffsetCommitPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                )
            topics.append(OffsetCommitTopicResponse(name=t.name, partitions=tuple(parts)))
        return OffsetCommitResponse(topics=tuple(topics))

    async def _fetch_offsets(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.OFFSET_FETCH)
        if code:
            return OffsetFetchResponse(error_code=code, error_message=f"scripted {code.name}")
        asked: dict[str, list[int]] = {}
        if req.topics is None:
            for g, tp in self.offsets:
                if g == req.group_id:
                    asked.setdefault(tp.topic, []).append(tp.partition)
        else:
            asked = {t.name: list(t.partition_indexes) for t in req.topics}
        topics = []
        for name, parts in asked.items():
            out = []
            for p in parts:
                offset, epoch = self.offsets.get((req.group_id, TopicPartition(name, p)), (-1, -1))
                out.append(
                    OffsetFetchPartitionResponse(
                        partition_index=p, committed_offset=offset, committed_leader_epoch=epoch
                    )
                )
            topics.append(OffsetFetchTopicResponse(name=name, partitions=tuple(out)))
        return OffsetFetchResponse(topics=tuple(topics))

    # -- coordinator and admin ----------------------------------------------------------------

    async def _find(self, req: Any) -> Any:
        self.requests.append(req)
        code = self._error(ApiKey.FIND_COORDINATOR)
        if code:
            return FindCoordinatorResponse(error_code=code, error_message=f"scripted {code.name}")
        b = self.broker
        return FindCoordinatorResponse(node_id=b.node_id, host="127.0.0.1", port=b.port)

    async def _describe(self, req: Any) -> Any:
        out = []
        for group_id in req.groups:
            group = self.groups.get(group_id)
            if group is None:
                out.append(DescribedGroup(group_id=group_id, error_code=0, group_state="Dead",
                                          protocol_type="", protocol_data=""))  # fmt: skip
                continue
            members = tuple(
                DescribedGroupMember(
                    member_id=m,
                    client_id="cid",
                    client_host="/127.0.0.1",
                    member_metadata=b"",
                    member_assignment=group.assignments.get(m, b"")
                    if group.state == "Stable"
                    else b"",
                )
                for m in sorted(group.members)
            )
            out.append(
                DescribedGroup(
                    group_id=group_id,
                    error_code=0,
                    group_state=group.state,
                    protocol_type="consumer",
                    protocol_data=group.protocol or "",
                    members=members,
                )
            )
        return DescribeGroupsResponse(groups=tuple(out))

    async def _list(self, req: Any) -> Any:
        return ListGroupsResponse(
            groups=tuple(
                ListedGroup(group_id=g.group_id, protocol_type="consumer", group_state=g.state)
                for g in self.groups.values()
            )
        )

    async def _epoch_end(self, req: Any) -> Any:
        """Committed offsets carry leader epoch 0 (the fake's only epoch): its end is the log
        end, so a committed position is always valid."""
        return OffsetForLeaderEpochResponse(
            topics=tuple(
                OffsetForLeaderTopicResult(
                    topic=t.topic,
                    partitions=tuple(
                        OffsetForLeaderPartitionResult(
                            error_code=0,
                            partition=p.partition,
                            leader_epoch=0,
                            end_offset=self.broker.topics[t.topic][p.partition].end,
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            )
        )
