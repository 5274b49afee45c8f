"""The KRaft APIs' messages (issue 4): Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot,
DescribeQuorum, BrokerRegistration, BrokerHeartbeat, UnregisterBroker, and Fetch's raft fields.

The registry-wide suites (test_protocol_messages, test_protocol_fuzz_messages) check every API's
shape and fuzz it; these are realistic round trips, defaults, bad fields and the one-partition
check the quorum requests need.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.codec import (
    RequestDecodeError,
    decode_request,
    decode_response_body,
    decode_response_header,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.framing import FrameDecoder
from protocol.messages import REQUESTS, ApiKey, Request, Response
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from protocol.messages.describe_quorum import (
    DescribeQuorumListener,
    DescribeQuorumNode,
    DescribeQuorumPartition,
    DescribeQuorumPartitionResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopic,
    DescribeQuorumTopicResponse,
    QuorumReplicaState,
)
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResponse,
)
from protocol.messages.fetch_snapshot import (
    NO_SNAPSHOT,
    FetchSnapshotPartition,
    FetchSnapshotPartitionResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    FetchSnapshotTopic,
    FetchSnapshotTopicResponse,
)
from protocol.messages.quorum_common import (
    LeaderEndpoint,
    LeaderIdAndEpoch,
    NodeEndpoint,
    SnapshotId,
)
from protocol.messages.quorum_epoch import (
    BeginQuorumEpochPartition,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    BeginQuorumEpochTopic,
    EndQuorumEpochPartition,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EndQuorumEpochTopic,
    QuorumEpochPartitionResponse,
    QuorumEpochTopicResponse,
)
from protocol.messages.vote import (
    VotePartition,
    VotePartitionResponse,
    VoteRequest,
    VoteResponse,
    VoteTopic,
    VoteTopicResponse,
)
from protocol.schema import InvalidMessageError, from_wire

META = "__cluster_metadata"
CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"


def payload_of(frame: bytes) -> bytes:
    dec = FrameDecoder()
    dec.feed(frame)
    (payload,) = dec.frames()
    return payload


def vote(*partitions: VotePartition, topic: str = META) -> VoteRequest:
    return VoteRequest(
        topics=(VoteTopic(topic_name=topic, partitions=partitions),),
        cluster_id=CLUSTER,
        voter_id=2,
    )


VOTE_P0 = VotePartition(
    partition_index=0,
    candidate_epoch=7,
    candidate_id=1,
    last_offset_epoch=6,
    last_offset=1234,
)

REQUEST_EXAMPLES: list[Request] = [
    vote(VOTE_P0),
    vote(
        VotePartition(
            partition_index=0,
            candidate_epoch=7,
            candidate_id=3,
            last_offset_epoch=6,
            last_offset=1234,
            pre_vote=True,
        )
    ),
    BeginQuorumEpochRequest(
        topics=(
            BeginQuorumEpochTopic(
                topic_name=META,
                partitions=(
                    BeginQuorumEpochPartition(partition_index=0, leader_id=1, leader_epoch=7),
                ),
            ),
        ),
        cluster_id=CLUSTER,
        voter_id=2,
        leader_endpoints=(LeaderEndpoint(name="CONTROLLER", host="127.0.0.1", port=9093),),
    ),
    EndQuorumEpochRequest(
        topics=(
            EndQuorumEpochTopic(
                topic_name=META,
                partitions=(
                    EndQuorumEpochPartition(
                        partition_index=0, leader_id=1, leader_epoch=7, preferred_successors=(3, 2)
                    ),
                ),
            ),
        ),
        cluster_id=CLUSTER,
    ),
    FetchSnapshotRequest(
        topics=(
            FetchSnapshotTopic(
                name=META,
                partitions=(
                    FetchSnapshotPartition(
                        partition=0,
                        current_leader_epoch=7,
                        snapshot_id=SnapshotId(end_offset=5000, epoch=6),
                        position=1048576,
                    ),
                ),
            ),
        ),
        cluster_id=CLUSTER,
        replica_id=3,
        max_bytes=1048576,
    ),
    DescribeQuorumRequest(
        topics=(
            DescribeQuorumTopic(
                topic_name=META, partitions=(DescribeQuorumPartition(partition_index=0),)
            ),
        )
    ),
    BrokerRegistrationRequest(
        broker_id=4,
        cluster_id=CLUSTER,
        incarnation_id="fsxY8x3XRpC1v4gOGkOoJw",
        listeners=(
            BrokerRegistrationListener(name="PLAINTEXT", host="localhost", port=9092),
            BrokerRegistrationListener(name="INTERNAL", host="10.0.0.4", port=9094),
        ),
        features=(
            BrokerRegistrationFeature(
                name="metadata.version", min_supported_version=1, max_supported_version=1
            ),
        ),
        rack="r1",
        previous_broker_epoch=112,
    ),
    BrokerHeartbeatRequest(
        broker_id=4,
        broker_epoch=230,
        current_metadata_offset=4711,
        want_fence=False,
        want_shut_down=True,
    ),
    UnregisterBrokerRequest(broker_id=4),
    FetchRequest(
        max_wait_ms=500,
        min_bytes=0,
        topics=(
            FetchTopic(
                name=META,
                partitions=(
                    FetchPartition(
                        index=0, fetch_offset=4712, current_leader_epoch=7, last_fetched_epoch=6
                    ),
                ),
            ),
        ),
        replica_id=2,
        cluster_id=CLUSTER,
        replica_epoch=-1,
    ),
]

RESPONSE_EXAMPLES: list[Response] = [
    VoteResponse(
        topics=(
            VoteTopicResponse(
                topic_name=META,
                partitions=(
                    VotePartitionResponse(
                        partition_index=0,
                        error_code=0,
                        leader_id=-1,
                        leader_epoch=7,
                        vote_granted=True,
                    ),
                ),
            ),
        )
    ),
    VoteResponse(
        topics=(
            VoteTopicResponse(
                topic_name=META,
                partitions=(
                    VotePartitionResponse(
                        partition_index=0,
                        error_code=ErrorCode.FENCED_LEADER_EPOCH,
                        leader_id=2,
                        leader_epoch=8,
                        error_message="epoch 7 is older than this voter's epoch 8",
                    ),
                ),
            ),
        ),
        node_endpoints=(NodeEndpoint(node_id=2, host="127.0.0.1", port=9094),),
    ),
    BeginQuorumEpochResponse(
        topics=(
            QuorumEpochTopicResponse(
                topic_name=META,
                partitions=(
                    QuorumEpochPartitionResponse(
                        partition_index=0, error_code=0, leader_id=1, leader_epoch=7
                    ),
                ),
            ),
        )
    ),
    EndQuorumEpochResponse(
        error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
        error_message="cluster id 'x' is not this quorum's cluster id 'y'",
    ),
    FetchSnapshotResponse(
        topics=(
            FetchSnapshotTopicResponse(
                name=META,
                partitions=(
                    FetchSnapshotPartitionResponse(
                        index=0,
                        error_code=0,
                        snapshot_id=SnapshotId(end_offset=5000, epoch=6),
                        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=7),
                        size=3_000_000,
                        position=1048576,
                        unaligned_records=b"\x00\x01" * 100,
                    ),
                ),
            ),
        )
    ),
    DescribeQuorumResponse(
        topics=(
            DescribeQuorumTopicResponse(
                topic_name=META,
                partitions=(
                    DescribeQuorumPartitionResponse(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=7,
                        high_watermark=4711,
                        current_voters=(
                            QuorumReplicaState(
                                replica_id=1,
                                log_end_offset=4720,
                                last_caught_up_timestamp=1_700_000_000_000,
                            ),
                            QuorumReplicaState(
                                replica_id=2,
                                log_end_offset=4711,
                                last_fetch_timestamp=1_699_999_999_900,
                                last_caught_up_timestamp=1_699_999_999_900,
                            ),
                        ),
                        observers=(QuorumReplicaState(replica_id=4, log_end_offset=4700),),
                    ),
                ),
            ),
        ),
        nodes=(
            DescribeQuorumNode(
                node_id=1,
                listeners=(DescribeQuorumListener(name="CONTROLLER", host="127.0.0.1", port=9093),),
            ),
        ),
    ),
    BrokerRegistrationResponse(broker_epoch=230),
    BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False, should_shut_down=True),
    UnregisterBrokerResponse(
        error_code=ErrorCode.BROKER_ID_NOT_REGISTERED, error_message="broker 9 is not registered"
    ),
    FetchResponse(
        topics=(
            FetchTopicResponse(
                name=META,
                partitions=(
                    FetchPartitionResponse(
                        index=0,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=8),
                    ),
                    FetchPartitionResponse(
                        index=1,
                        error_code=0,
                        high_watermark=5000,
                        snapshot_id=SnapshotId(end_offset=5000, epoch=6),
                    ),
                ),
            ),
        ),
        node_endpoints=(NodeEndpoint(node_id=2, host="127.0.0.1", port=9094),),
    ),
]


def _name(obj: object) -> str:
    return type(obj).__name__


@pytest.mark.parametrize("body", REQUEST_EXAMPLES, ids=_name)
def test_request_round_trip(body: Request) -> None:
    env = decode_request(payload_of(encode_request(41, "controller-1", body)))
    assert env.body == body
    assert env.api_key == type(body).API_KEY
    assert REQUESTS[env.api_key] is type(body)


@pytest.mark.parametrize("body", RESPONSE_EXAMPLES, ids=_name)
def test_response_round_trip(body: Response) -> None:
    corr, raw = decode_response_header(payload_of(encode_response(41, body)))
    assert corr == 41
    assert decode_response_body(type(body), raw) == body


@pytest.mark.parametrize(
    ("key", "number", "name"),
    [
        (ApiKey.VOTE, 52, "VoteRequest"),
        (ApiKey.BEGIN_QUORUM_EPOCH, 53, "BeginQuorumEpochRequest"),
        (ApiKey.END_QUORUM_EPOCH, 54, "EndQuorumEpochRequest"),
        (ApiKey.DESCRIBE_QUORUM, 55, "DescribeQuorumRequest"),
        (ApiKey.FETCH_SNAPSHOT, 59, "FetchSnapshotRequest"),
        (ApiKey.BROKER_REGISTRATION, 62, "BrokerRegistrationRequest"),
        (ApiKey.BROKER_HEARTBEAT, 63, "BrokerHeartbeatRequest"),
        (ApiKey.UNREGISTER_BROKER, 64, "UnregisterBrokerRequest"),
    ],
)
def test_kraft_apis_are_registered_under_kafkas_keys(key: ApiKey, number: int, name: str) -> None:
    assert int(key) == number
    assert REQUESTS[key].__name__ == name


def test_vote_defaults_to_a_real_vote_of_an_unknown_cluster() -> None:
    """Only the partition data is required: no cluster id, voter unchecked, not a pre-vote."""
    req = from_wire(VoteRequest, [[[META, [[0, 7, 1, 6, 1234]]]]])
    assert (req.cluster_id, req.voter_id) == (None, -1)
    assert req.topics[0].partitions[0].pre_vote is False


def test_heartbeat_response_defaults_to_fenced_and_not_caught_up() -> None:
    """Kafka's defaults: a broker that learns nothing else must consider itself fenced."""
    resp = from_wire(BrokerHeartbeatResponse, [])
    assert (resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (False, True, False)


def test_fetch_snapshot_error_answer_carries_no_snapshot() -> None:
    part = from_wire(FetchSnapshotPartitionResponse, [0, int(ErrorCode.SNAPSHOT_NOT_FOUND)])
    assert part.snapshot_id == NO_SNAPSHOT
    assert (part.size, part.position, part.unaligned_records) == (-1, -1, b"")


def test_old_shaped_fetch_request_and_response_have_no_raft_fields() -> None:
    """A peer from before issue 4 leaves the KRaft fields out: they take their defaults."""
    req = from_wire(FetchRequest, [500, 1, [["t", [[0, 42]]]], 1024, -1, 0, "", 0, -1, []])
    assert (req.cluster_id, req.replica_epoch) == (None, -1)
    part = from_wire(FetchPartitionResponse, [0, 0, 10, 10, 0, b"", None, None])
    assert (part.current_leader, part.snapshot_id) == (None, None)
    assert from_wire(FetchResponse, [[], 0, 0, None, 0]).node_endpoints == ()


@pytest.mark.parametrize(
    ("cls", "wire", "problem"),
    [
        (
            VoteRequest,
            [[[META, [[0, "7", 1, 6, 1234]]]]],
            "topics[0].partitions[0].candidate_epoch: expected an integer, got str",
        ),
        (
            VoteRequest,
            [[[META, [[0, 7, 1, 6, 1234, 1]]]]],
            "topics[0].partitions[0].pre_vote: expected a boolean, got int",
        ),
        (
            VoteRequest,
            [[[META, [[0, 7, 1, 6]]]]],
            "VotePartition has 4 fields, needs at least 5 (missing 'last_offset')",
        ),
        (
            BeginQuorumEpochRequest,
            [[[META, [[0, 1, 7]]]], 5],
            "cluster_id: expected a string, got int",
        ),
        (
            EndQuorumEpochRequest,
            [[[META, [[0, 1, 7, [2, "3"]]]]]],
            "preferred_successors[1]: expected an integer, got str",
        ),
        (
            FetchSnapshotRequest,
            [[[META, [[0, 7, [5000], 0]]]]],
            "SnapshotId has 1 fields, needs at least 2 (missing 'epoch')",
        ),
        (
            FetchSnapshotRequest,
            [[[META, [[0, 7, None, 0]]]]],
            "snapshot_id: expected an array for SnapshotId, got nil",
        ),
        (DescribeQuorumRequest, [None], "topics: expected an array, got nil"),
        (
            BrokerRegistrationRequest,
            [4, CLUSTER, "id", [["PLAINTEXT", "h", "9092"]]],
            "listeners[0].port: expected an integer, got str",
        ),
        (
            BrokerHeartbeatRequest,
            [4, 230, 4711, False],
            "BrokerHeartbeatRequest has 4 fields, needs at least 5 (missing 'want_shut_down')",
        ),
        (UnregisterBrokerRequest, [2**64], "does not fit in a signed 64-bit int"),
    ],
)
def test_bad_fields_are_named(cls: type, wire: Any, problem: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_wire(cls, wire)
    assert problem in str(info.value)


def test_bad_quorum_request_on_the_wire_is_invalid_request() -> None:
    """The codec answers a malformed quorum request with INVALID_REQUEST naming the field."""
    frame = encode_request(
        5,
        "c",
        BrokerHeartbeatRequest(
            broker_id=1,
            broker_epoch=2,
            current_metadata_offset=3,
            want_fence=True,
            want_shut_down=False,
        ),
    )
    payload = payload_of(frame).replace(b"\xc3\xc2", b"\x01\xc2")  # want_fence True -> int 1
    with pytest.raises(RequestDecodeError) as info:
        decode_request(payload)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "want_fence: expected a boolean, got int" in str(info.value)


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (vote(VOTE_P0), VOTE_P0),
        (
            FetchSnapshotRequest(
                topics=(
                    FetchSnapshotTopic(
                        name=META,
                        partitions=(
                            FetchSnapshotPartition(
                                partition=0,
                                current_leader_epoch=1,
                                snapshot_id=SnapshotId(end_offset=1, epoch=1),
                                position=0,
                            ),
                        ),
                    ),
                )
            ),
            None,
        ),
    ],
    ids=["vote", "fetch-snapshot"],
)
def test_only_partition_returns_the_one_partition(request_: Any, expected: Any) -> None:
    part = request_.only_partition(META, 0)
    assert part is request_.topics[0].partitions[0]
    if expected is not None:
        assert part == expected


def _begin(topic: str, *indexes: int) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(
        topics=(
            BeginQuorumEpochTopic(
                topic_name=topic,
                partitions=tuple(
                    BeginQuorumEpochPartition(partition_index=i, leader_id=1, leader_epoch=2)
                    for i in indexes
                ),
            ),
        )
    )


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (vote(topic="orders"), "it named none"),
        (vote(VOTE_P0, topic="orders"), "it named orders-0"),
        (vote(VOTE_P0, VOTE_P0), f"it named {META}-0, {META}-0"),
        (_begin(META, 1), f"it named {META}-1"),
        (
            EndQuorumEpochRequest(topics=()),
            "it named none",
        ),
        (
            EndQuorumEpochRequest(
                topics=(
                    EndQuorumEpochTopic(
                        topic_name=META,
                        partitions=(
                            EndQuorumEpochPartition(partition_index=0, leader_id=1, leader_epoch=2),
                        ),
                    ),
                    EndQuorumEpochTopic(topic_name="x", partitions=()),
                )[::-1]  # the empty topic first
            ),
            None,
        ),
    ],
)
def test_only_partition_refuses_anything_but_the_metadata_partition(
    request_: Any, named: str | None
) -> None:
    if named is None:  # an extra topic without partitions names nothing more: accepted
        assert request_.only_partition(META, 0).leader_id == 1
        return
    with pytest.raises(KafkaError) as info:
        request_.only_partition(META, 0)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    name = type(request_).__name__
    assert f"{name} must name exactly one partition, {META}-0; {named}" in str(info.value)
