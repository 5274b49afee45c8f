"""Group coordinator requests on the wire (exact messages, no client library), shared by the
single-broker and cluster tests."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.group_offsets import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    OffsetFetchRequest,
    OffsetFetchTopic,
)
from protocol.messages.groups import (
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

SESSION_MS = 3000
REBALANCE_MS = 6000


async def find_coordinator(
    host: str, port: int, group: str, *, within: float = 30.0
) -> FindCoordinatorResponse:
    """Ask until a coordinator is named (COORDINATOR_NOT_AVAILABLE while the offsets topic is
    created or its partition leaderless)."""
    found: list[FindCoordinatorResponse] = []

    async def named() -> bool:
        async with await WireClient.connect(host, port) as c:
            resp = await c.request(FindCoordinatorRequest(key=group))
        assert resp.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE), resp
        found[:] = [resp]
        return resp.error_code == 0

    await wait_until(named, within=within, every=0.2)
    return found[0]


def join_request(
    group: str, member_id: str = "", protocols: tuple[str, ...] = ("range",)
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id,
        protocol_type="consumer",
        protocols=tuple(
            JoinGroupProtocol(name=p, metadata=b"sub:" + p.encode()) for p in protocols
        ),
    )


async def new_member_id(c: WireClient, group: str) -> str:
    """KIP-394: the first JoinGroup gets MEMBER_ID_REQUIRED and the id to rejoin with."""
    resp: JoinGroupResponse = await c.request(join_request(group))
    assert resp.error_code == ErrorCode.MEMBER_ID_REQUIRED, resp
    assert resp.member_id
    return resp.member_id


async def join(c: WireClient, group: str, member_id: str) -> JoinGroupResponse:
    return await c.request(join_request(group, member_id))


async def sync(
    c: WireClient,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
) -> SyncGroupResponse:
    return await c.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            assignments=tuple(
                SyncGroupAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ),
        )
    )


async def heartbeat(c: WireClient, group: str, generation: int, member_id: str) -> int:
    resp = await c.request(
        HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    )
    return resp.error_code


async def commit(
    c: WireClient, group: str, generation: int, member_id: str, topic: str, offsets: dict[int, int]
) -> dict[int, int]:
    """{partition: error code}."""
    resp = await c.request(
        OffsetCommitRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            topics=(
                OffsetCommitTopic(
                    name=topic,
                    partitions=tuple(
                        OffsetCommitPartition(
                            partition_index=p, committed_offset=o, committed_metadata="m"
                        )
                        for p, o in offsets.items()
                    ),
                ),
            ),
        )
    )
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


async def fetch_offsets(
    c: WireClient, group: str, topic: str, partitions: list[int]
) -> tuple[int, dict[int, int]]:
    """(group error code, {partition: committed offset})."""
    resp = await c.request(
        OffsetFetchRequest(
            group_id=group,
            topics=(OffsetFetchTopic(name=topic, partition_indexes=tuple(partitions)),),
        )
    )
    offsets = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
    return resp.error_code, offsets
